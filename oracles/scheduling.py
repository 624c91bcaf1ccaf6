"""``pods_schedulable``: no pod of the app stays unschedulable.

A pod counts as stuck when its ``PodScheduled`` condition has been ``False`` (reason
``Unschedulable``) for longer than ``grace_seconds``. A pod merely Pending is normal during a
rollout, but the scheduler marks a pod Unschedulable only after it failed to place it (taints,
affinity, node selector, resources), so the grace is short.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pydantic import Field

from sregym.oracles import (CheckResult, MitigationOracle, WindowParams, mitigation_oracle, pods_matching,
                            sample_window, window_of, window_result)


class SchedulableParams(WindowParams):
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict, description="only pods with these labels")
    grace_seconds: float = Field(5.0, ge=0, description="how long a pod may stay unschedulable")


def unschedulable(pods: list[dict], grace_s: float, now: datetime) -> list[str]:
    """``pod: message`` for pods unschedulable for longer than ``grace_s``."""
    out = []
    for p in pods:
        if p.get("status", {}).get("phase") != "Pending" or p["metadata"].get("deletionTimestamp"):
            continue
        for c in p.get("status", {}).get("conditions", []) or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                since = datetime.fromisoformat(c.get("lastTransitionTime", "").replace("Z", "+00:00") or now.isoformat())
                if (now - since).total_seconds() >= grace_s:
                    out.append(f"{p['metadata']['name']}: {c.get('reason', '')} {c.get('message', '')}".strip()[:200])
    return out


@mitigation_oracle("pods_schedulable")
class PodsSchedulable(MitigationOracle):
    """No (selected) pod is stuck unschedulable at any sample of the window."""

    Params = SchedulableParams

    def check(self) -> CheckResult:
        p = self.params
        ns = p.namespace or self.ctx.namespace

        def probe() -> tuple[bool, dict[str, Any]]:
            pods = pods_matching(self.ctx.kube, ns, p.labels)
            stuck = unschedulable(pods, p.grace_seconds, datetime.now(timezone.utc))
            return not stuck, {"reason": "; ".join(stuck)} if stuck else {"pods": len(pods)}

        samples = sample_window(probe, window_of(p, self.ctx.window_seconds), p.interval_seconds,
                                min_pass_fraction=p.min_pass_fraction)
        return window_result(self.name, samples, p.min_pass_fraction, evidence={"namespace": ns})
