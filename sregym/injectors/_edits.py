"""Base class of primitives that change Kubernetes object fields and put them back."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import Field

from sregym.injectors._api import Injector, P, PlannedState
from sregym.injectors._objects import (
    WORKLOAD_KINDS,
    apply_edits,
    container_index,
    dig,
    edit,
    find_workload,
    namespace_of,
    pods_of,
    require_object,
)


class EditState(PlannedState):
    """The planned state of an :class:`ObjectEdit`: its field changes, with their original values."""

    edits: list[dict[str, Any]] = Field(default_factory=list, description="field changes (see ``edit``)")


class WorkloadEditState(EditState):
    """The planned state of a :class:`WorkloadEdit`: its edits, the workload and the container."""

    workload: list[str] = Field(default_factory=list, description="[kind, namespace, name] of the workload")
    container: str | None = Field(None, description="the container the edit is about")


class ObjectEdit(Injector[P]):
    """``plan`` returns an :class:`EditState` (see ``objects.edit``): ``inject`` applies each
    ``after``, ``recover`` restores each ``before`` in reverse order. Both are idempotent."""

    State: ClassVar[type[EditState]] = EditState

    @abc.abstractmethod
    def plan(self) -> EditState:
        """Read the objects and return the edits (with original values) and what ``verify`` needs."""

    def inject(self, state: EditState) -> None:
        apply_edits(self.ctx.kube, state.edits)

    def recover(self, state: EditState) -> None:
        apply_edits(self.ctx.kube, state.edits, undo=True)


class WorkloadEdit(ObjectEdit[P]):
    """An edit of one container of one Deployment/StatefulSet/DaemonSet (the target)."""

    targets = WORKLOAD_KINDS
    State: ClassVar[type[WorkloadEditState]] = WorkloadEditState

    def locate(self) -> tuple[str, str, dict, int]:
        """(kind, namespace, object, container index) of the target."""
        ns = namespace_of(self.ctx, self.target)
        kind, obj = find_workload(self.ctx.kube, ns, self.target)
        return kind, ns, obj, container_index(obj, self.target.container)

    def container_state(self, field: str, after_of: Callable[[Any], Any]) -> WorkloadEditState:
        """Plan one change of ``containers[i].<field>``: ``after_of(before)`` gives the new value."""
        kind, ns, obj, i = self.locate()
        container = obj["spec"]["template"]["spec"]["containers"][i]
        path = ["spec", "template", "spec", "containers", i, field]
        before = dig(obj, path)
        return self.State(edits=[edit(kind, ns, obj["metadata"]["name"], path, before, after_of(before))],
                          workload=[kind, ns, obj["metadata"]["name"]], container=container["name"])

    def workload_state(self, path: list[str | int], after_of: Callable[[Any], Any]) -> WorkloadEditState:
        """Plan one change of a field of the workload object (``path`` from its root)."""
        kind, ns, obj, i = self.locate()
        before = dig(obj, path)
        return self.State(edits=[edit(kind, ns, obj["metadata"]["name"], path, before, after_of(before))],
                          workload=[kind, ns, obj["metadata"]["name"]],
                          container=obj["spec"]["template"]["spec"]["containers"][i]["name"])

    def live_pods(self, state: WorkloadEditState) -> list[dict]:
        kind, ns, name = state.workload
        return pods_of(self.ctx.kube, require_object(self.ctx.kube, kind, name, ns))
