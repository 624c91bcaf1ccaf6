"""Kill pods of a workload (deleted with no grace period, as a node or OOM would)."""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import Injector, PlannedState, Verification, get_object, injector, resource, running_pods


class PodKillParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(1, ge=1, description="how many of the target's running pods (seeded choice)")
    grace_seconds: int = Field(0, ge=0)


class PodKillState(PlannedState):
    pods: list[tuple[str, str, str]] = Field(default_factory=list,
                                             description="(namespace, name, uid) of each pod to delete")


@injector("pod_kill")
class PodKill(Injector[PodKillParams]):
    """Delete some running pods of the target; their controller replaces them."""

    Params = PodKillParams
    State = PodKillState
    targets = ("Pod", "Deployment", "StatefulSet", "DaemonSet")

    def plan(self) -> PodKillState:
        pods = running_pods(self.ctx, self.target)
        chosen = random.Random(f"{self.ctx.seed}:pod_kill").sample(pods, min(self.params.count, len(pods)))
        return PodKillState(pods=[(p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["uid"])
                                  for p in chosen])

    def inject(self, state: PodKillState) -> None:
        pods = resource(self.ctx.kube, "Pod")
        for ns, name, uid in state.pods:
            obj = get_object(self.ctx.kube, "Pod", name, ns)
            if obj and obj["metadata"]["uid"] == uid:
                pods.delete(name=name, namespace=ns, body={"gracePeriodSeconds": self.params.grace_seconds,
                                                           "preconditions": {"uid": uid}})

    def verify(self, state: PodKillState) -> Verification:
        gone = [name for ns, name, uid in state.pods
                if (o := get_object(self.ctx.kube, "Pod", name, ns)) is None or o["metadata"]["uid"] != uid
                or o["metadata"].get("deletionTimestamp")]
        return Verification(len(gone) == len(state.pods), f"killed: {', '.join(gone) or 'none'}")

    def recover(self, state: PodKillState) -> None:
        """Nothing to undo: the pods' controller recreates them."""
