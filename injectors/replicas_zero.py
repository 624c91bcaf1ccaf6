"""Workload scaled to zero replicas."""

from __future__ import annotations

from typing import Any

from sregym.injectors import NoParams, Verification, WorkloadEdit, injector


@injector("replicas_zero")
class ReplicasZero(WorkloadEdit[NoParams]):
    """Scale a Deployment or StatefulSet to zero: every pod goes away."""

    targets = ("Deployment", "StatefulSet")

    def plan(self) -> dict[str, Any]:
        return self.workload_state(["spec", "replicas"], lambda before: 0)

    def verify(self, state: dict[str, Any]) -> Verification:
        alive = [p["metadata"]["name"] for p in self.live_pods(state)]
        return Verification(not alive, f"pods left: {', '.join(alive) or 'none'}")
