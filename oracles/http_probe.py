"""``http_probe``: real requests from inside the cluster to a service URL get the answer a working
service gives, over the window.

"Answers 2xx" is not "works": any process can answer 200 (a Service pointed at another workload,
a stub, a health endpoint that knows nothing of the broken dependency). So each request must get
one of ``expect_status`` (default 200) *and* a body of the working shape: every key path of
``expect_json`` present in the JSON answer (``hotels``, ``products.0.id``) and/or ``expect_body``
matching it. A problem must declare a shape; point the URL at a path that uses the broken
dependency, through the entry service, as a user's request would.

Work done out of band (an order fulfilled from a queue) shows in no answer of the request that
asks for it: ``before`` makes the requests a user makes first (put an item in a cart), ``json`` is
the probed request's body, and ``follow`` asks a second URL, named from the answer (``{orderId}``),
until its answer matches within ``within_seconds`` (the order's status is no longer pending). Each
sample is then the whole journey: it passes only if the follow-up matched in time. ``$sample`` in
any URL or body is a token of its own for each sample (a shopper no one else is).

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
from pydantic import BaseModel, ConfigDict, Field, model_validator

from sregym.oracles import (OWNER_LABEL, OWNER_VALUE, CheckResult, ClusterError, MitigationOracle, Sample,
                            WindowParams, grade_lost, lost, mitigation_oracle, window_of, window_result)

PROBE_IMAGE = "sregym/base:bookworm"

BODY_BYTES = 65536  # the start of each answer, judged on the conductor's side

# Runs in the probe pod: N requests spread over the window, one JSON line each (with the body);
# argv[6], JSON: the journey around each (``before``, ``json``, ``follow``; see HttpProbeParams).
PROBE_SCRIPT = r"""
import json, os, re, sys, time, urllib.error, urllib.request
url, n, window, timeout, method = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
journey = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
def ask(method, url, payload=None):
    body, data = b"", None
    if payload is not None:
        data = json.dumps(payload).encode()
    elif method == "POST":
        data = b""
    try:
        req = urllib.request.Request(url, method=method, data=data,
                                     headers={"Content-Type": "application/json"} if payload is not None else {})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body, code, err = r.read(%d), r.status, None
    except urllib.error.HTTPError as e:
        code, err, body = e.code, None, e.read(%d)
    except Exception as e:
        code, err = None, f"{type(e).__name__}: {e}"
    return code, err, body.decode("utf-8", "replace")
def fill(value, token):
    return json.loads(json.dumps(value).replace("$sample", token))
def follow_up(answer, token):
    f = journey["follow"]
    try:
        names = json.loads(answer)
        target = fill(f["url"], token).format(**names) if isinstance(names, dict) else None
    except (ValueError, KeyError, IndexError):
        target = None
    if target is None:
        return {"status": None, "error": "the answer names nothing to follow", "body": "", "waited_s": 0.0}
    t0 = time.time()
    while True:
        code, err, body = ask("GET", target)
        waited = round(time.time() - t0, 2)
        if code in f["expect_status"] and re.search(f["expect_body"], body) or waited >= f["within_seconds"]:
            return {"status": code, "error": err, "body": body, "waited_s": waited}
        time.sleep(f["every_seconds"])
start = time.time()
for i in range(n):
    time.sleep(max(0.0, start + window * i / max(1, n - 1) - time.time()))
    token = os.urandom(4).hex()
    t0 = time.time()
    line = {"t": round(t0 - start, 2)}
    for step in journey.get("before") or []:
        code, err, body = ask(step["method"], fill(step["url"], token), fill(step.get("json"), token))
        if not (code and 200 <= code < 300):
            line["before_failed"] = f"{step['method']} {fill(step['url'], token)}: {err or f'HTTP {code}'} {body[:80]}"
            break
    if "before_failed" in line:
        code, err, body = None, line["before_failed"], ""
    else:
        code, err, body = ask(method, fill(url, token), fill(journey.get("json"), token))
    line |= {"status": code, "error": err, "latency_s": round(time.time() - t0, 3), "body": body}
    if journey.get("follow") and code is not None and "before_failed" not in line:
        line["follow"] = follow_up(body, token)
    print(json.dumps(line), flush=True)
""" % (BODY_BYTES, BODY_BYTES)


class HttpStep(BaseModel):
    """A request a user makes before the probed one (each must get a 2xx)."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(..., pattern=r"^https?://")
    method: str = Field("POST", pattern=r"^(GET|POST)$")
    json_body: Any = Field(None, alias="json", description="sent as the JSON body")


class FollowUp(BaseModel):
    """Asked after the probed request, until its answer matches or ``within_seconds`` pass."""

    model_config = ConfigDict(extra="forbid")
    url: str = Field(..., pattern=r"^https?://",
                     description="keys of the probed answer's JSON fill {braces}: .../orders/{orderId}")
    expect_status: list[int] = Field(default_factory=lambda: [200])
    expect_body: str = Field(..., description="a regular expression the follow-up's answer must match in time")
    within_seconds: float = Field(20.0, gt=0, le=300)
    every_seconds: float = Field(1.0, gt=0)

    @model_validator(mode="after")
    def _pattern(self) -> FollowUp:
        try:
            re.compile(self.expect_body)
        except re.error as e:
            raise ValueError(f"follow.expect_body is not a regular expression: {e}") from None
        return self


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
    before: list[HttpStep] = Field(default_factory=list, description="requests made first, each sample")
    json_body: Any = Field(None, alias="json", description="the probed request's JSON body")
    follow: FollowUp | None = Field(None, description="what must follow the answer, in time")

    def journey(self) -> dict[str, Any]:
        """The part of the params the probe pod's script needs besides the request itself."""
        return {"before": [{"method": s.method, "url": s.url, "json": s.json_body} for s in self.before],
                "json": self.json_body, "follow": self.follow.model_dump() if self.follow else None}

    def seconds_per_request(self) -> float:
        """The longest one sample can take (its requests' timeouts and the follow-up's wait)."""
        follow = self.follow.within_seconds + self.timeout_seconds if self.follow else 0.0
        return self.timeout_seconds * (1 + len(self.before)) + follow

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
            "activeDeadlineSeconds": int(window_s + p.requests * p.seconds_per_request() + 300),
            "containers": [{
                "name": "check", "image": p.image, "imagePullPolicy": "IfNotPresent",
                "command": ["python3", "-c", PROBE_SCRIPT, p.url, str(p.requests), str(window_s),
                            str(p.timeout_seconds), p.method, json.dumps(p.journey())],
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
    follow = line.get("follow")
    if ok and p.follow is not None:
        ok, reason = _followed(follow, p.follow)
    detail = {"status": status, "latency_s": line.get("latency_s")} | ({"reason": reason} if reason else {})
    if follow:
        detail["follow"] = {"status": follow.get("status"), "waited_s": follow.get("waited_s")}
    return Sample(float(line.get("t", 0.0)), ok, detail)


def _followed(follow: dict[str, Any] | None, f: FollowUp) -> tuple[bool, str]:
    """Whether the follow-up's last answer matched in time, and why not."""
    if not follow:
        return False, "no follow-up was asked"
    status, body = follow.get("status"), str(follow.get("body") or "")
    if status not in f.expect_status or not re.search(f.expect_body, body):
        why = follow.get("error") or (f"HTTP {status}" if status not in f.expect_status else f"{body[:80]!r}")
        return False, f"follow-up did not match {f.expect_body!r} within {f.within_seconds:g}s: {why}"
    return True, ""


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
        # every URL and body of the journey, as the app's namespace fills them in
        p = HttpProbeParams.model_validate(json.loads(json.dumps(p.model_dump(by_alias=True))
                                                      .replace("$namespace", self.ctx.namespace)))
        ensure_namespace(core, ns)
        core.create_namespaced_pod(ns, probe_pod(name, ns, p, window_s))
        try:
            phase, logs = self._wait(core, name, ns, window_s + p.requests * p.seconds_per_request() + 180,
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
