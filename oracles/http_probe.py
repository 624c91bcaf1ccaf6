"""``http_probe``: real requests from inside the cluster to a service URL get the answer a working
service gives, over the window.

"Answers 2xx" is not "works": any process can answer 200 (a Service pointed at another workload,
a stub, a health endpoint that knows nothing of the broken dependency). So each request must get
one of ``expect_status`` (default 200) *and* a body of the working shape: every key path of
``expect_json`` present in the JSON answer (``hotels``, ``products.0.id``) and/or ``expect_body``
matching it. A problem must declare a shape; point the URL at a path that uses the broken
dependency, through the entry service, as a user's request would.

The requests come from a short-lived pod in the hidden fault-plane namespace (the agent cannot see
it), spread evenly over the window, so a service that answers once and then fails again does not
pass. The pod is deleted afterwards whatever happens.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from pydantic import Field, model_validator

from sregym.oracles import (OWNER_LABEL, OWNER_VALUE, CheckResult, ClusterError, MitigationOracle, Sample,
                            WindowParams, grade_lost, lost, mitigation_oracle, window_of, window_result)

PROBE_IMAGE = "sregym/base:bookworm"

BODY_BYTES = 65536  # the start of each answer, judged on the conductor's side

# Runs in the probe pod: N requests spread over the window, one JSON line each (with the body).
PROBE_SCRIPT = r"""
import json, sys, time, urllib.error, urllib.request
url, n, window, timeout, method = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
start = time.time()
for i in range(n):
    time.sleep(max(0.0, start + window * i / max(1, n - 1) - time.time()))
    t0 = time.time()
    body = b""
    try:
        req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read(%d)
            code, err = r.status, None
    except urllib.error.HTTPError as e:
        code, err = e.code, None
        body = e.read(%d)
    except Exception as e:
        code, err = None, f"{type(e).__name__}: {e}"
    print(json.dumps({"t": round(t0 - start, 2), "status": code, "error": err,
                      "latency_s": round(time.time() - t0, 3), "body": body.decode("utf-8", "replace")}), flush=True)
""" % (BODY_BYTES, BODY_BYTES)


class HttpProbeParams(WindowParams):
    url: str = Field(..., pattern=r"^https?://",
                     description="through the entry service, e.g. http://frontend.$namespace.svc:8080/hotels?... "
                                 "($namespace: the app's namespace)")
    method: str = Field("GET", pattern=r"^(GET|POST)$", description="POST sends an empty body")
    requests: int = Field(10, ge=1, le=1000, description="spread evenly over the window")
    expect_status: list[int] = Field(default_factory=lambda: [200], description="working statuses")
    expect_json: list[str] = Field(default_factory=list,
                                   description="key paths the JSON answer must have, e.g. hotels, products.0.id")
    expect_body: str | None = Field(None, description="a regular expression the answer's body must match")
    max_latency_seconds: float | None = Field(None, gt=0)
    timeout_seconds: float = Field(5.0, gt=0)
    image: str = PROBE_IMAGE

    @model_validator(mode="after")
    def _shape_declared(self) -> HttpProbeParams:
        if not self.expect_json and not self.expect_body:
            raise ValueError("say what a working answer looks like: expect_json (key paths of the JSON answer) "
                             "or expect_body (a regular expression); a status alone is what any process answers")
        if self.expect_body is not None:
            try:
                re.compile(self.expect_body)
            except re.error as e:
                raise ValueError(f"expect_body is not a regular expression: {e}") from None
        return self


def probe_pod(name: str, namespace: str, p: HttpProbeParams, window_s: float) -> dict[str, Any]:
    """A pod that runs PROBE_SCRIPT once; neutral name and labels."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {OWNER_LABEL: OWNER_VALUE}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "activeDeadlineSeconds": int(window_s + p.requests * p.timeout_seconds + 300),
            "containers": [{
                "name": "check", "image": p.image, "imagePullPolicy": "IfNotPresent",
                "command": ["python3", "-c", PROBE_SCRIPT, p.url, str(p.requests), str(window_s),
                            str(p.timeout_seconds), p.method],
                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
            }],
        },
    }


def has_path(doc: Any, path: str) -> bool:
    """Whether a decoded JSON document has ``path`` (dotted keys; a number indexes a list), with a
    value that is not null."""
    cur = doc
    for part in path.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit() and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return False
    return cur is not None


def shape_problem(body: str, p: HttpProbeParams) -> str:
    """Why an answer's body is not what a working service gives ('' when it is)."""
    if p.expect_json:
        try:
            doc = json.loads(body)
        except ValueError:
            return f"answer is not JSON: {body[:80]!r}"
        missing = [k for k in p.expect_json if not has_path(doc, k)]
        if missing:
            return f"answer lacks {', '.join(missing)}: {body[:80]!r}"
    if p.expect_body is not None and not re.search(p.expect_body, body):
        return f"answer does not match {p.expect_body!r}: {body[:80]!r}"
    return ""


def judge_line(line: dict[str, Any], p: HttpProbeParams) -> Sample:
    status = line.get("status")
    ok = status in p.expect_status
    reason = line.get("error") or (f"HTTP {status}" if not ok else "")
    if ok and (why := shape_problem(str(line.get("body") or ""), p)):
        ok, reason = False, why
    if ok and p.max_latency_seconds is not None and line.get("latency_s", 0) > p.max_latency_seconds:
        ok, reason = False, f"slow: {line['latency_s']}s"
    detail = {"status": status, "latency_s": line.get("latency_s")} | ({"reason": reason} if reason else {})
    return Sample(float(line.get("t", 0.0)), ok, detail)


def ensure_namespace(core: client.CoreV1Api, name: str) -> None:
    """The hidden namespace normally exists (the conductor creates it); create it plainly if not."""
    try:
        core.read_namespace(name)
    except client.ApiException as e:
        if e.status != 404:
            raise ClusterError(f"cannot read namespace {name}: {e.reason}") from None
        body = {"metadata": {"name": name}}  # no labels: nothing may tell what it is for
        try:
            core.create_namespace(body)
        except client.ApiException as e2:
            if e2.status != 409:
                raise ClusterError(f"cannot create namespace {name}: {e2.reason}") from None


# the probe pod's phase when it was stopped because its answers already failed the check
LOST = "stopped: the answers so far fail the check"
STOPPED = "stopped: another oracle already failed the grade"


def judged(logs: str, p: HttpProbeParams) -> list[Sample]:
    """One sample per complete JSON line of the probe pod's log (a line being written is skipped)."""
    samples = []
    for raw in logs.splitlines():
        try:
            samples.append(judge_line(json.loads(raw), p))
        except (json.JSONDecodeError, AttributeError):
            continue
    return samples


@mitigation_oracle("http_probe")
class HttpProbe(MitigationOracle):
    """``requests`` HTTP requests to ``url`` over the window, from a pod inside the cluster."""

    Params = HttpProbeParams

    def check(self) -> CheckResult:
        p = self.params
        window_s = window_of(p, self.ctx.window_seconds)
        ns = self.ctx.hidden_namespace
        core = self.ctx.kube.core
        name = f"check-{secrets.token_hex(4)}"
        p = p.model_copy(update={"url": p.url.replace("$namespace", self.ctx.namespace)})
        ensure_namespace(core, ns)
        core.create_namespaced_pod(ns, probe_pod(name, ns, p, window_s))
        try:
            phase, logs = self._wait(core, name, ns, window_s + p.requests * p.timeout_seconds + 180,
                                     lambda text: lost(judged(text, p), p.min_pass_fraction, p.requests))
        finally:
            try:
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
            except client.ApiException:
                pass  # already gone
        samples = judged(logs, p)
        evidence = {"url": p.url, "probe_phase": phase, "requests": p.requests}
        if phase in (LOST, STOPPED):  # the answers so far already fail the check (or another oracle
            evidence["stopped_after"] = len(samples)  # failed the grade): the rest cannot change it
        elif len(samples) < p.requests:
            evidence["missing_answers"] = p.requests - len(samples)
            samples += [Sample(window_s, False, {"reason": f"probe pod ended ({phase}) before this request"})
                        for _ in range(p.requests - len(samples))]
        return window_result(self.name, samples, p.min_pass_fraction, evidence=evidence)

    def _wait(self, core: client.CoreV1Api, name: str, ns: str, timeout: float,
              decided: Callable[[str], bool]) -> tuple[str, str]:
        """The pod's phase and log once it ended, or ``LOST`` and the log so far as soon as
        ``decided`` says the answers so far fail the check whatever the rest would be."""
        deadline = time.monotonic() + timeout
        phase = "Pending"
        while time.monotonic() < deadline:
            pod = core.read_namespaced_pod(name, ns)
            phase = pod.status.phase or "Pending"
            if phase in ("Succeeded", "Failed"):
                break
            if phase == "Running":
                try:
                    so_far = core.read_namespaced_pod_log(name, ns) or ""
                except client.ApiException:
                    so_far = ""
                if decided(so_far):
                    return LOST, so_far
                if grade_lost():
                    return STOPPED, so_far
            waiting = [cs.state.waiting.reason for cs in pod.status.container_statuses or []
                       if cs.state and cs.state.waiting and cs.state.waiting.reason in
                       ("ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName")]
            if waiting:
                raise ClusterError(f"the probe pod cannot start: {waiting[0]} for image {self.params.image}",
                                   hint="build the base image (`sregym images build`) or set params.image")
            time.sleep(1.0)
        try:
            logs = core.read_namespaced_pod_log(name, ns)
        except client.ApiException as e:
            logs = ""
            phase = f"{phase} (logs unavailable: {e.reason})"
        return phase, logs
