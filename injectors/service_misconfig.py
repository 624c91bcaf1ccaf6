"""Service misconfigured: wrong port, wrong targetPort, or a selector that matches no pod."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sregym.injectors import (EditState, ObjectEdit, UserInputError, Verification, edit, injector, list_objects,
                              namespace_of, require_object)


class ServiceParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    field: Literal["port", "targetPort", "selector"] = Field(..., description="what to get wrong")
    value: int | None = Field(None, ge=1, le=65535, description="the wrong port (port, targetPort)")
    port_name: str | None = Field(None, description="which Service port (default: the first)")
    selector: dict[str, str] | None = Field(None, description="the wrong selector (default: one label changed)")

    @model_validator(mode="after")
    def _value(self) -> ServiceParams:
        if self.field != "selector" and self.value is None:
            raise ValueError(f"value: the wrong {self.field} is required")
        return self


def endpoint_slices(kube: Any, namespace: str, service: str) -> list[dict]:
    return list_objects(kube, "EndpointSlice", namespace, {"kubernetes.io/service-name": service})


class ServiceState(EditState):
    port_index: int | None = Field(None, description="the Service port edited (a port field), if any")


@injector("service_misconfig")
class ServiceMisconfig(ObjectEdit[ServiceParams]):
    """Give a Service a wrong port, a wrong targetPort, or a selector that matches no pod."""

    Params = ServiceParams
    State = ServiceState
    targets = ("Service",)

    def plan(self) -> ServiceState:
        if not self.target.name:
            raise UserInputError("target.name: name the Service")
        ns = namespace_of(self.ctx, self.target)
        svc = require_object(self.ctx.kube, "Service", self.target.name, ns)
        spec = svc["spec"]
        if self.params.field == "selector":
            before = spec.get("selector") or {}
            after = self.params.selector or {k: f"{v}-v2" for k, v in before.items()}
            return ServiceState(edits=[edit("Service", ns, self.target.name, ["spec", "selector"], before, after)])
        ports = spec.get("ports") or []
        idx = next((i for i, p in enumerate(ports) if p.get("name") == self.params.port_name), None) \
            if self.params.port_name else (0 if ports else None)
        if idx is None:
            raise UserInputError(f"params.port_name: Service {ns}/{self.target.name} has no port "
                                 f"{self.params.port_name!r}")
        path = ["spec", "ports", idx, self.params.field]
        return ServiceState(edits=[edit("Service", ns, self.target.name, path, ports[idx].get(self.params.field),
                               self.params.value)], port_index=idx)

    def verify(self, state: ServiceState) -> Verification:
        e = state.edits[0]
        svc = require_object(self.ctx.kube, "Service", e["name"], e["namespace"])
        slices = endpoint_slices(self.ctx.kube, e["namespace"], e["name"])
        addresses = [a for s in slices for ep in s.get("endpoints") or [] for a in ep.get("addresses") or []]
        if self.params.field == "selector":
            return Verification(not addresses and svc["spec"].get("selector") == e["after"],
                                f"endpoints behind the Service: {len(addresses)}")
        if self.params.field == "port":
            live = svc["spec"]["ports"][state.port_index]["port"]
            return Verification(live == self.params.value, f"Service port is {live}")
        served = {p.get("port") for s in slices for p in s.get("ports") or []}
        return Verification(self.params.value in served, f"endpoint ports: {sorted(x for x in served if x)}")
