"""A workload's volume pointed at a claim that cannot be used: one that never binds (a storage
class nobody provides) or one that does not exist. Its pods cannot be scheduled."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (UserInputError, Verification, WorkloadEdit, WorkloadEditState, apply_edits, create_object,
                              delete_object, edit, get_object, injector, unschedulable)


class PvcParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    how: Literal["unbound", "missing"] = "unbound"
    volume: str | None = Field(None, description="volume name in the pod spec (default: the first claim)")
    storage_class: str = Field("fast-ssd", description="unbound: a storage class no provisioner serves")


class PvcState(WorkloadEditState):
    claim: dict[str, Any] | None = Field(None, description="the claim the fault creates (unbound), if any")


@injector("pvc_problem")
class PvcProblem(WorkloadEdit[PvcParams]):
    """Point a Deployment's volume at a claim that never binds (or does not exist): new pods stay Pending."""

    Params = PvcParams
    State = PvcState
    targets = ("Deployment",)

    def plan(self) -> PvcState:
        kind, ns, obj, i = self.locate()
        volumes = obj["spec"]["template"]["spec"].get("volumes") or []
        idx = next((k for k, v in enumerate(volumes) if v.get("persistentVolumeClaim")
                    and (self.params.volume in (None, v["name"]))), None)
        if idx is None:
            raise UserInputError(f"params.volume: {kind} {obj['metadata']['name']} has no claim volume "
                                 f"{self.params.volume or ''}".strip())
        old = volumes[idx]["persistentVolumeClaim"]["claimName"]
        new = f"{old}-v2"
        path = ["spec", "template", "spec", "volumes", idx, "persistentVolumeClaim", "claimName"]
        state = PvcState(edits=[edit(kind, ns, obj["metadata"]["name"], path, old, new)],
                         workload=[kind, ns, obj["metadata"]["name"]],
                         container=obj["spec"]["template"]["spec"]["containers"][i]["name"], claim=None)
        if self.params.how == "unbound":
            source = get_object(self.ctx.kube, "PersistentVolumeClaim", old, ns) or {"spec": {}}
            state.claim = {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": new, "namespace": ns,
                             "labels": dict(self.ctx.labels)},
                "spec": {"accessModes": source["spec"].get("accessModes") or ["ReadWriteOnce"],
                         "storageClassName": self.params.storage_class,
                         "resources": source["spec"].get("resources") or {"requests": {"storage": "1Gi"}}}}
        return state

    def inject(self, state: PvcState) -> None:
        if state.claim:
            create_object(self.ctx.kube, state.claim)
        apply_edits(self.ctx.kube, state.edits)

    def verify(self, state: PvcState) -> Verification:
        stuck = unschedulable(self.live_pods(state))
        return Verification(bool(stuck), f"pods waiting for a usable claim: {', '.join(stuck) or 'none'}")

    def recover(self, state: PvcState) -> None:
        apply_edits(self.ctx.kube, state.edits, undo=True)
        if state.claim:
            m = state.claim["metadata"]
            delete_object(self.ctx.kube, "PersistentVolumeClaim", m["name"], m["namespace"])
