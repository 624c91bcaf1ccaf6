"""A client load surge: the app's load generator scaled out or told to send faster."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sregym.injectors import (ABSENT, Verification, WorkloadEdit, WorkloadEditState, dig, edit, injector, ready,
                              running_with)


class LoadSurgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    replicas: int | None = Field(None, ge=1, description="run this many load generator pods")
    env: dict[str, str] = Field(default_factory=dict, description="rate settings, e.g. {RPS: '500'}")

    @model_validator(mode="after")
    def _something(self) -> LoadSurgeParams:
        if self.replicas is None and not self.env:
            raise ValueError("give replicas, env (the generator's rate settings) or both")
        return self


@injector("load_surge")
class LoadSurge(WorkloadEdit[LoadSurgeParams]):
    """Scale the load generator (target) out and/or raise its rate settings."""

    Params = LoadSurgeParams
    targets = ("Deployment", "StatefulSet")

    def plan(self) -> WorkloadEditState:
        kind, ns, obj, i = self.locate()
        name = obj["metadata"]["name"]
        edits = []
        if self.params.env:
            path = ["spec", "template", "spec", "containers", i, "env"]
            before = dig(obj, path)
            env = [e for e in (before if before != ABSENT else []) if e["name"] not in self.params.env]
            edits.append(edit(kind, ns, name, path, before, env + [{"name": k, "value": v}
                                                                  for k, v in sorted(self.params.env.items())]))
        if self.params.replicas is not None:
            edits.append(edit(kind, ns, name, ["spec", "replicas"], dig(obj, ["spec", "replicas"]), self.params.replicas))
        return WorkloadEditState(edits=edits, workload=[kind, ns, name],
                                 container=obj["spec"]["template"]["spec"]["containers"][i]["name"])

    def verify(self, state: WorkloadEditState) -> Verification:
        pods = [p for p in self.live_pods(state) if ready(p)]
        if self.params.env:
            want = self.params.env
            pods = [p for p in pods if running_with([p], state.container, lambda c: want.items() <= {
                e["name"]: e.get("value") for e in c.get("env") or []}.items())]
        need = self.params.replicas or 1
        return Verification(len(pods) >= need, f"ready generator pods with the surge settings: {len(pods)}/{need}")
