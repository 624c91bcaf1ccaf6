"""Pods that cannot be scheduled: impossible nodeSelector, impossible affinity, or a node taint."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (ABSENT, Verification, WorkloadEdit, WorkloadEditState, delete_object, dig, edit, injector,
                              require_object, unschedulable)


class UnschedulableParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    how: Literal["node_selector", "affinity", "taint"] = "node_selector"
    label: str = Field("node.kubernetes.io/pool", description="node label (node_selector, affinity) or taint key")
    value: str = Field("reserved", description="a value no node has (label) or the taint's value")


class UnschedulableState(WorkloadEditState):
    pods: list[str] = Field(default_factory=list, description="pods deleted so they are rescheduled (taint)")


@injector("unschedulable")
class Unschedulable(WorkloadEdit[UnschedulableParams]):
    """Make a workload's new pods unschedulable. node_selector/affinity change the pod template (a
    stuck rollout, then pending pods); taint puts a NoSchedule taint on the pods' nodes and deletes
    the pods, so replacements stay Pending (other new pods on those nodes are refused too)."""

    Params = UnschedulableParams
    State = UnschedulableState

    def plan(self) -> UnschedulableState:
        p = self.params
        if p.how == "node_selector":
            return self.workload_state(["spec", "template", "spec", "nodeSelector"],
                                       lambda b: {**(b if b != ABSENT else {}), p.label: p.value})
        if p.how == "affinity":
            term = {"matchExpressions": [{"key": p.label, "operator": "In", "values": [p.value]}]}
            return self.workload_state(["spec", "template", "spec", "affinity"], lambda b: {
                **(b if b != ABSENT else {}),
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})
        state = self.workload_state(["metadata", "generation"], lambda b: b)  # locates the workload
        pods = self.live_pods(state)
        nodes = sorted({x["spec"]["nodeName"] for x in pods if x["spec"].get("nodeName")})
        taint = {"key": p.label, "value": p.value, "effect": "NoSchedule"}
        edits = []
        for node in nodes:
            obj = require_object(self.ctx.kube, "Node", node, None)
            before = dig(obj, ["spec", "taints"])
            after = [t for t in (before if before != ABSENT else []) if t.get("key") != p.label] + [taint]
            edits.append(edit("Node", None, node, ["spec", "taints"], before, after))
        return UnschedulableState(edits=edits, workload=state.workload, container=state.container,
                                  pods=[x["metadata"]["name"] for x in pods])

    def inject(self, state: UnschedulableState) -> None:
        super().inject(state)
        for pod in state.pods:
            delete_object(self.ctx.kube, "Pod", pod, state.workload[1])

    def verify(self, state: UnschedulableState) -> Verification:
        stuck = unschedulable(self.live_pods(state))
        return Verification(bool(stuck), f"unschedulable pods: {', '.join(stuck) or 'none'}")
