"""A client load surge: the app's load generator scaled out or told to send faster.

The target is the app's own load generator unless the problem names another: the charts run one per
app namespace (``loadgen-<namespace>`` in the load generators' namespace), so a problem that named
``loadgen-online-shop`` surged the users of the ``online-shop`` namespace whatever namespace the app
ran in (measured: the anti-gaming cells of ``online-shop-gaming`` ran their app at its usual rate
while another namespace's shop took the surge)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sregym.injectors import (ABSENT, LOADGEN_NAMESPACE, LOADGEN_TARGET_LABEL, Selector, Verification, WorkloadEdit,
                              WorkloadEditState, container_index, dig, edit, find_workload, injector, ready,
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


def own_load_generator(target: Selector, app_namespace: str) -> Selector:
    """``target`` narrowed to the load generator labelled with ``app_namespace`` (the one it drives)."""
    return target.model_copy(update={"labels": {LOADGEN_TARGET_LABEL: app_namespace}})


@injector("load_surge")
class LoadSurge(WorkloadEdit[LoadSurgeParams]):
    """Scale the load generator (target) out and/or raise its rate settings."""

    Params = LoadSurgeParams
    targets = ("Deployment", "StatefulSet")

    def locate(self) -> tuple[str, str, dict, int]:
        """The workload the target names, else the load generator of the target's namespace (the
        load generators', as a problem says) that drives the app's namespace."""
        t = self.target
        if t.name or t.labels:
            return super().locate()
        ns = t.namespace or LOADGEN_NAMESPACE
        kind, obj = find_workload(self.ctx.kube, ns, own_load_generator(t, self.ctx.app_namespace))
        return kind, ns, obj, container_index(obj, t.container)

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
