"""Kill pods of a workload (deleted with no grace period, as a node or OOM would)."""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import Injector, Verification, injector
from sregym.injectors.node import running_pods
from sregym.injectors.objects import get_object, resource


class PodKillParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    count: int = Field(1, ge=1, description="how many of the target's running pods (seeded choice)")
    grace_seconds: int = Field(0, ge=0)


@injector("pod_kill")
class PodKill(Injector[PodKillParams]):
    """Delete some running pods of the target; their controller replaces them."""

    Params = PodKillParams
    targets = ("Pod", "Deployment", "StatefulSet", "DaemonSet")

    def plan(self) -> dict[str, Any]:
        pods = running_pods(self.ctx, self.target)
        chosen = random.Random(f"{self.ctx.seed}:pod_kill").sample(pods, min(self.params.count, len(pods)))
        return {"pods": [[p["metadata"]["namespace"], p["metadata"]["name"], p["metadata"]["uid"]] for p in chosen]}

    def inject(self, state: dict[str, Any]) -> None:
        pods = resource(self.ctx.kube, "Pod")
        for ns, name, uid in state["pods"]:
            obj = get_object(self.ctx.kube, "Pod", name, ns)
            if obj and obj["metadata"]["uid"] == uid:
                pods.delete(name=name, namespace=ns, body={"gracePeriodSeconds": self.params.grace_seconds,
                                                           "preconditions": {"uid": uid}})

    def verify(self, state: dict[str, Any]) -> Verification:
        gone = [name for ns, name, uid in state["pods"]
                if (o := get_object(self.ctx.kube, "Pod", name, ns)) is None or o["metadata"]["uid"] != uid
                or o["metadata"].get("deletionTimestamp")]
        return Verification(len(gone) == len(state["pods"]), f"killed: {', '.join(gone) or 'none'}")

    def recover(self, state: dict[str, Any]) -> None:
        """Nothing to undo: the pods' controller recreates them."""
