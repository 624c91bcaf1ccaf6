"""``retry_policy``: the callers no longer run a retry policy that amplifies load.

A metastable retry storm outlives its trigger because each timed-out call is sent again: the
retries are the sustaining cause. Once the trigger is gone, a restart can end a storm by luck
(the restarted system starts in its good state), while the configuration that turns the next
blip into a storm stays. So a storm counts as mitigated only when its SLO recovered (``slo``)
and this oracle finds the amplification removed.

What it judges is what runs: the environment of every running container of each caller workload
(``printenv`` in it), read the way the services' HTTP client reads it (``<TARGET>_RETRIES`` before
``CALL_RETRIES``, ``<TARGET>_TIMEOUT_SECONDS`` before ``CALL_TIMEOUT_SECONDS``, else the client's
defaults). A fixed ConfigMap that running pods have not picked up, a per-target key left bad, or a
value the client cannot parse (the service would not start) all fail.

A call to a target no longer amplifies when it is retried at most ``max_retries`` times and, if
retried at all, its timeout leaves at least ``min_seconds_per_retry`` per retry: the number of
retries bounds how many times a request's work can be multiplied, and the timeout per retry bounds
how fast retries pile onto a dependency that is slow but working. The defaults are the policy the
apps were designed with (2 retries at a 2 s timeout), the one every baseline ran under.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sregym.oracles import (CheckResult, MitigationOracle, WindowParams, list_json, mitigation_oracle, sample_window,
                            window_of, window_result, workload_labels)


class RetryPolicyParams(WindowParams):
    workloads: list[str] = Field(..., min_length=1, description="the callers (Deployments or StatefulSets)")
    targets: list[str] = Field(..., min_length=1, description="the services they call whose calls must not amplify")
    namespace: str | None = None
    max_retries: int = Field(2, ge=0, description="most retries of one call")
    min_seconds_per_retry: float = Field(1.0, gt=0, description="timeout / retries may not fall below this")
    default_retries: int = Field(2, ge=0, description="what the client uses when no key is set")
    default_timeout_seconds: float = Field(2.0, gt=0, description="what the client uses when no key is set")


def parse_env(printenv: str) -> dict[str, str]:
    """``printenv`` output as a dict (a value may itself contain ``=``)."""
    return dict(line.split("=", 1) for line in printenv.splitlines() if "=" in line)


def _setting(env: dict[str, str], target: str, suffix: str, default: Any) -> tuple[str, Any]:
    """(the key that decides, its raw value) as the client reads it: per target, then global, then default."""
    for key in (f"{target.upper().replace('-', '_')}_{suffix}", f"CALL_{suffix}"):
        if key in env:
            return key, env[key]
    return "default", default


def amplifying_calls(env: dict[str, str], params: RetryPolicyParams) -> list[str]:
    """For each target, why calls to it still amplify load under ``env`` (empty: none do)."""
    out = []
    for target in params.targets:
        rkey, rraw = _setting(env, target, "RETRIES", params.default_retries)
        tkey, traw = _setting(env, target, "TIMEOUT_SECONDS", params.default_timeout_seconds)
        try:
            retries = int(rraw)
        except ValueError:
            out.append(f"{target}: {rkey}={str(rraw)[:40]!r} is not an integer")
            continue
        try:
            timeout = float(traw)
        except ValueError:
            out.append(f"{target}: {tkey}={str(traw)[:40]!r} is not a number")
            continue
        # written so that NaN fails every comparison and so fails the call
        sane = retries >= 0 and timeout > 0
        calm = retries <= params.max_retries and (retries == 0 or timeout >= retries * params.min_seconds_per_retry)
        if not (sane and calm):
            out.append(f"{target}: {retries} retries at a {timeout:g} s timeout")
    return out


@mitigation_oracle("retry_policy")
class RetryPolicy(MitigationOracle):
    """Every running caller container calls each target with a retry policy that does not amplify
    load (few enough retries, a timeout long enough per retry), for the whole window."""

    Params = RetryPolicyParams

    def probe(self, ns: str) -> tuple[bool, dict[str, Any]]:
        problems: list[str] = []
        for workload in self.params.workloads:
            pods = [p for p in list_json(self.ctx.kube, "pods", ns, workload_labels(self.ctx.kube, ns, workload))
                    if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]
            if not pods:
                problems.append(f"{workload}: no running pod to read the policy of")
            for pod in pods:
                name = pod["metadata"]["name"]
                for c in pod.get("spec", {}).get("containers") or []:
                    proc = self.ctx.kube.kubectl("exec", "-n", ns, name, "-c", c["name"], "--", "printenv",
                                                 check=False, timeout=20)
                    if proc.returncode != 0:
                        problems.append(f"pod/{name}/{c['name']}: environment unreadable")
                        continue
                    problems += [f"pod/{name}/{c['name']} -> {why}"
                                 for why in amplifying_calls(parse_env(proc.stdout), self.params)]
        return not problems, ({"reason": "; ".join(problems[:3]), "amplifying": problems[:10]} if problems else {})

    def check(self) -> CheckResult:
        ns = self.params.namespace or self.ctx.namespace
        samples = sample_window(lambda: self.probe(ns), window_of(self.params, self.ctx.window_seconds),
                                self.params.interval_seconds, min_pass_fraction=self.params.min_pass_fraction)
        return window_result(self.name, samples, self.params.min_pass_fraction, evidence={"namespace": ns})
