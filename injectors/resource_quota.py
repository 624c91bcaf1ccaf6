"""A ResourceQuota or LimitRange too tight for a workload's pods to be (re)created."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (FaultError, Verification, WorkloadEdit, WorkloadEditState, create_object, delete_object,
                              get_object, injector, list_objects, poll)

QUOTA_SYNC_SECONDS = 30.0


class QuotaParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    how: Literal["quota", "limit_range"] = "quota"
    name: str = Field("compute-resources", description="name of the object created in the namespace")
    max_memory: str = Field("8Mi", description="limit_range: the per-container memory maximum")


class QuotaState(WorkloadEditState):
    manifest: dict[str, Any] = Field(default_factory=dict, description="the ResourceQuota or LimitRange created")
    pods: list[str] = Field(default_factory=list, description="the target's pods deleted (to be refused)")


def stays_counted(pod: dict[str, Any]) -> bool:
    """Whether the pod will still hold a place in the quota's pod count once the target's pods are
    gone. A pod already being deleted (a rollout's or another test's) leaves within its grace period;
    counted, it would leave the target a free place when it goes, and the target would come back."""
    return (not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") in ("Running", "Pending"))


@injector("resource_quota")
class ResourceQuota(WorkloadEdit[QuotaParams]):
    """Add a ResourceQuota (pods capped at the count of the *other* pods) or a LimitRange (memory
    maximum below the container's) to the namespace, then delete the target's pods: the controller
    cannot recreate them."""

    Params = QuotaParams
    State = QuotaState

    def plan(self) -> QuotaState:
        state = self.workload_state(["metadata", "generation"], lambda b: b)
        ns = state.workload[1]
        mine = {p["metadata"]["name"] for p in self.live_pods(state)}
        others = [p for p in list_objects(self.ctx.kube, "Pod", ns)
                  if p["metadata"]["name"] not in mine and stays_counted(p)]
        # the run's labels (from the conductor) let `sregym cleanup` find the object after a crash
        meta = {"name": self.params.name, "namespace": ns,
                "labels": dict(self.ctx.labels)}
        if self.params.how == "quota":
            manifest = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta,
                        "spec": {"hard": {"pods": str(len(others))}}}
        else:
            manifest = {"apiVersion": "v1", "kind": "LimitRange", "metadata": meta,
                        "spec": {"limits": [{"type": "Container", "max": {"memory": self.params.max_memory}}]}}
        return QuotaState(edits=[], manifest=manifest, pods=sorted(mine), workload=state.workload)

    def inject(self, state: QuotaState) -> None:
        create_object(self.ctx.kube, state.manifest)
        m = state.manifest
        if m["kind"] == "ResourceQuota":
            # Admission enforces only the limits in the quota's status, which the quota controller
            # fills in after the create; a pod deleted before that is recreated unchecked.
            def synced() -> bool:
                quota = get_object(self.ctx.kube, "ResourceQuota", m["metadata"]["name"], m["metadata"]["namespace"])
                return bool(((quota or {}).get("status") or {}).get("hard"))

            if not poll(synced, QUOTA_SYNC_SECONDS, 0.5):
                raise FaultError(f"ResourceQuota {m['metadata']['namespace']}/{m['metadata']['name']} has no "
                                 f"status from the quota controller after {QUOTA_SYNC_SECONDS:.0f} s; is "
                                 "kube-controller-manager running?")
        for pod in state.pods:
            delete_object(self.ctx.kube, "Pod", pod, state.workload[1])

    def verify(self, state: QuotaState) -> Verification:
        ns = state.workload[1]
        refused = [e for e in list_objects(self.ctx.kube, "Event", ns)
                   if e.get("reason") == "FailedCreate" and ("quota" in (e.get("message") or "")
                                                            or "LimitRange" in (e.get("message") or "")
                                                            or "maximum" in (e.get("message") or ""))]
        alive = [p for p in self.live_pods(state) if not p["metadata"].get("deletionTimestamp")]
        return Verification(bool(refused) and not alive,
                            f"pod creations refused: {len(refused)}; target pods alive: {len(alive)}")

    def recover(self, state: QuotaState) -> None:
        m = state.manifest
        delete_object(self.ctx.kube, m["kind"], m["metadata"]["name"], m["metadata"]["namespace"])
