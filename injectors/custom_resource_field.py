"""One field of an operator's custom resource changed: the operator then makes the world match it,
and keeps putting back any fix made below it (on the objects it manages) until the CR is fixed."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (ABSENT, EditState, ObjectEdit, UserInputError, Verification, dig, edit, get_object,
                              injector, namespace_of, require_object)


class CustomResourceFieldParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_version: str = Field(..., description="group/version of the custom resource, e.g. pipeline.sregym.io/v1")
    kind: str = Field(..., description="its kind, e.g. QueueCluster")
    path: list[str | int] = Field(..., min_length=1, description="the field from the object's root, e.g. [spec, replicas]")
    value: Any = Field(None, description="the new value; None removes the field")


class CustomResourceFieldState(EditState):
    api_version: str = ""


@injector("custom_resource_field")
class CustomResourceField(ObjectEdit[CustomResourceFieldParams]):
    """Change one field of a custom resource (target: its name) that an operator reconciles."""

    Params = CustomResourceFieldParams
    State = CustomResourceFieldState

    def _where(self) -> tuple[str, str]:
        if not self.target.name:
            raise UserInputError("target.name: name the custom resource to change")
        return namespace_of(self.ctx, self.target), self.target.name

    def plan(self) -> CustomResourceFieldState:
        p = self.params
        ns, name = self._where()
        if not p.path or p.path[0] != "spec":
            raise UserInputError("params.path: change the spec (what the operator acts on), e.g. [spec, replicas]")
        try:
            obj = require_object(self.ctx.kube, p.kind, name, ns, api_version=p.api_version)
        except UserInputError:
            raise
        except Exception as e:  # noqa: BLE001 - an unknown kind or group is the problem file's error
            raise UserInputError(f"params: no custom resource {p.kind} in {p.api_version}: {e}") from None
        after = ABSENT if p.value is None else p.value
        return CustomResourceFieldState(
            edits=[edit(p.kind, ns, name, list(p.path), dig(obj, list(p.path)), after, api_version=p.api_version)],
            api_version=p.api_version)

    def verify(self, state: CustomResourceFieldState) -> Verification:
        e = state.edits[0]
        obj = get_object(self.ctx.kube, e["kind"], e["name"], e["namespace"], api_version=state.api_version)
        now = ABSENT if obj is None else dig(obj, e["path"])
        return Verification(now == e["after"], f"{e['kind']} {e['name']} {'.'.join(map(str, e['path']))} = {now!r}")
