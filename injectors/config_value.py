"""A ConfigMap or Secret value changed (optionally rolling the workloads that read it)."""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (ABSENT, EditState, ObjectEdit, Selector, UserInputError, Verification, apply_edits, dig,
                              edit, find_workload, injector, list_objects, namespace_of, pods_of, require_object,
                              restart_edits, restart_path)


def reads(workload: dict, kind: str, name: str, key: str) -> bool:
    """Whether a workload's containers take ``key`` of the ConfigMap or Secret ``name`` into their env."""
    ref_kind = "configMap" if kind == "ConfigMap" else "secret"
    for c in (workload["spec"]["template"]["spec"].get("containers") or []):
        for src in c.get("envFrom") or []:
            if (src.get(f"{ref_kind}Ref") or {}).get("name") == name:
                return True
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {}).get(f"{ref_kind}KeyRef") or {}
            if ref.get("name") == name and ref.get("key") == key:
                return True
    return False


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


class ConfigValueState(EditState):
    planned_at: str | None = Field(None, description="when planned (UTC): pods started since read the bad value")


@injector("config_value")
class ConfigValue(ObjectEdit[ConfigValueParams]):
    """Change or remove one key of a ConfigMap or Secret (e.g. a pool size, a TTL, a feature flag)."""

    Params = ConfigValueParams
    State = ConfigValueState
    targets = ("ConfigMap", "Secret")

    def plan(self) -> ConfigValueState:
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
        # when the key turned bad, as far as recover needs to know: pods that started after it read it
        return ConfigValueState(edits=edits, planned_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def recover(self, state: ConfigValueState) -> None:
        """Put the key back and roll what read the bad value: the restart list (by its edits) and any
        other workload whose pods started while the key was bad (restarted by someone else meanwhile:
        noise, an agent, validate's restart step), as fixing a setting takes in real life."""
        super().recover(state)
        since = state.planned_at
        rolled = {(e["kind"], e["name"]) for e in state.edits if e["path"] == restart_path()}
        ns = namespace_of(self.ctx, self.target)
        for kind in ("Deployment", "StatefulSet", "DaemonSet"):
            for workload in list_objects(self.ctx.kube, kind, ns):
                if (kind, workload["metadata"]["name"]) in rolled or not reads(workload, self.target.kind,
                                                                              self.target.name, self.params.key):
                    continue
                started = [p.get("status", {}).get("startTime") or "" for p in pods_of(self.ctx.kube, workload)]
                if since is None or any(t >= since for t in started):
                    apply_edits(self.ctx.kube, restart_edits(workload))

    def verify(self, state: ConfigValueState) -> Verification:
        e = next(x for x in state.edits if x["path"][0] == "data" and len(x["path"]) == 2)
        live = dig(require_object(self.ctx.kube, e["kind"], e["name"], e["namespace"]), e["path"])
        return Verification(live == e["after"], f"{e['kind']} {e['name']} key {self.params.key}: "
                            + ("changed" if live == e["after"] else "unchanged"))
