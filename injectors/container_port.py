"""Wrong containerPort on a named port that a Service's targetPort refers to."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (ABSENT, UserInputError, Verification, WorkloadEdit, WorkloadEditState, injector,
                              list_objects, namespace_of)


class ContainerPortParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: int = Field(..., ge=1, le=65535, description="the wrong containerPort")
    port_name: str | None = Field(None, description="which named port (default: the first)")


@injector("container_port")
class ContainerPort(WorkloadEdit[ContainerPortParams]):
    """Change a container's (named) port so Services that target it by name send traffic nowhere."""

    Params = ContainerPortParams

    def plan(self) -> WorkloadEditState:
        def after(before: Any) -> list[dict]:
            ports = [dict(p) for p in (before if before != ABSENT else [])]
            idx = next((i for i, p in enumerate(ports) if p.get("name") == self.params.port_name), None) \
                if self.params.port_name else (0 if ports else None)
            if idx is None:
                raise UserInputError(f"params.port_name: the container has no port {self.params.port_name!r}")
            ports[idx]["containerPort"] = self.params.value
            return ports

        return self.container_state("ports", after)

    def verify(self, state: WorkloadEditState) -> Verification:
        e = state.edits[0]
        slices = list_objects(self.ctx.kube, "EndpointSlice", namespace_of(self.ctx, self.target))
        served = {p.get("port") for s in slices for p in s.get("ports") or []}
        return Verification(self.params.value in served,
                            f"endpoint slices in {e['namespace']} now serve port {self.params.value}"
                            if self.params.value in served else "no Service endpoint uses the wrong port yet")
