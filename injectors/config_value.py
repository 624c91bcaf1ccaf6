"""A ConfigMap or Secret value changed (optionally rolling the workloads that read it)."""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.core.errors import UserInputError
from sregym.core.problem import Selector
from sregym.injectors import Verification, injector
from sregym.injectors.edits import ObjectEdit
from sregym.injectors.objects import ABSENT, dig, edit, find_workload, namespace_of, require_object, restart_edits


class ConfigValueParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str = Field(..., description="data key in the ConfigMap or Secret")
    value: str | None = Field(None, description="new value (plain text, also for Secrets); None removes the key")
    restart: list[str] = Field(default_factory=list,
                               description="workloads (by name) to roll so they read the new value")


def encoded(kind: str, value: str | None) -> Any:
    if value is None:
        return ABSENT
    return base64.b64encode(value.encode()).decode() if kind == "Secret" else value


@injector("config_value")
class ConfigValue(ObjectEdit[ConfigValueParams]):
    """Change or remove one key of a ConfigMap or Secret (e.g. a pool size, a TTL, a feature flag)."""

    Params = ConfigValueParams
    targets = ("ConfigMap", "Secret")

    def plan(self) -> dict[str, Any]:
        if not self.target.name or self.target.kind not in ("ConfigMap", "Secret"):
            raise UserInputError("target: give kind (ConfigMap or Secret) and name")
        ns, kind = namespace_of(self.ctx, self.target), self.target.kind
        obj = require_object(self.ctx.kube, kind, self.target.name, ns)
        path = ["data", self.params.key]
        edits = [edit(kind, ns, self.target.name, path, dig(obj, path), encoded(kind, self.params.value))]
        if obj.get("data") is None:  # JSON patch cannot add a key under a missing map
            edits.insert(0, edit(kind, ns, self.target.name, ["data"], ABSENT, {}))
        for name in self.params.restart:
            _, workload = find_workload(self.ctx.kube, ns, Selector(name=name), where="params.restart")
            edits += restart_edits(workload)
        return {"edits": edits}

    def verify(self, state: dict[str, Any]) -> Verification:
        e = next(x for x in state["edits"] if x["path"][0] == "data" and len(x["path"]) == 2)
        live = dig(require_object(self.ctx.kube, e["kind"], e["name"], e["namespace"]), e["path"])
        return Verification(live == e["after"], f"{e['kind']} {e['name']} key {self.params.key}: "
                            + ("changed" if live == e["after"] else "unchanged"))
