"""Workload scaled to zero replicas."""

from __future__ import annotations

from sregym.injectors import NoParams, Verification, WorkloadEdit, WorkloadEditState, injector


@injector("replicas_zero")
class ReplicasZero(WorkloadEdit[NoParams]):
    """Scale a Deployment or StatefulSet to zero: every pod goes away."""

    targets = ("Deployment", "StatefulSet")

    def plan(self) -> WorkloadEditState:
        return self.workload_state(["spec", "replicas"], lambda before: 0)

    def verify(self, state: WorkloadEditState) -> Verification:
        alive = [p["metadata"]["name"] for p in self.live_pods(state)]
        return Verification(not alive, f"pods left: {', '.join(alive) or 'none'}")
