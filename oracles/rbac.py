"""``workload_may``: a workload's own ServiceAccount may again do what its job needs.

A controller that lost a permission fails quietly: it keeps running, its reconcile gets 403s, and
whatever it should put back stays broken. Putting the broken thing back by hand ends the symptom
but leaves the controller unable to do its job the next time; the incident is over only when the
workload may act again. The check is the API server's own answer (a SubjectAccessReview as the
workload's ServiceAccount, read from its pod template at each sample), so any real grant counts:
the Role repaired, a new Role or ClusterRole bound, the workload moved to an account that holds it.
A workload that no longer exists fails: removing the controller is not repairing it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from sregym.oracles import (CheckResult, MitigationOracle, WindowParams, get_json, mitigation_oracle, sample_window,
                            window_of, window_result)


class WorkloadMayParams(WindowParams):
    workload: str = Field(..., description="the workload whose ServiceAccount needs the permission")
    kind: Literal["Deployment", "StatefulSet", "DaemonSet"] = "Deployment"
    namespace: str | None = None
    verb: str = Field(..., description="verb the workload needs, e.g. patch")
    resource: str = Field(..., description="resource it needs it on, e.g. statefulsets")
    api_group: str = Field("", description="API group of the resource ('' = core)")


@mitigation_oracle("workload_may")
class WorkloadMay(MitigationOracle):
    """The workload's ServiceAccount is allowed ``verb`` on ``resource`` over the whole window."""

    Params = WorkloadMayParams

    def check(self) -> CheckResult:
        p = self.params
        ns = p.namespace or self.ctx.namespace
        what = f"{p.verb} {p.resource}" + (f".{p.api_group}" if p.api_group else "")

        def probe() -> tuple[bool, dict[str, Any]]:
            obj = get_json(self.ctx.kube, p.kind, p.workload, ns)
            if obj is None:
                return False, {"reason": f"{p.kind} {ns}/{p.workload} does not exist"}
            sa = obj["spec"]["template"]["spec"].get("serviceAccountName") or "default"
            allowed = self.ctx.kube.can(ns, sa, p.verb, p.resource, p.api_group)
            answer = f"the API server {'allows' if allowed else 'denies'} {what} to ServiceAccount {ns}/{sa}"
            return allowed, {"answer" if allowed else "reason": answer}

        samples = sample_window(probe, window_of(p, self.ctx.window_seconds), p.interval_seconds,
                                min_pass_fraction=p.min_pass_fraction)
        return window_result(self.name, samples, p.min_pass_fraction,
                             evidence={"workload": f"{p.kind}/{p.workload}", "needs": what})
