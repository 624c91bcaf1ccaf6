"""Noise: a rolling restart of a Deployment (like a routine `kubectl rollout restart`), the root cause's
too unless a restart would cure its fault."""

from __future__ import annotations

from pydantic import Field

from sregym.injectors import (RESTART_ANNOTATION, EditState, Injector, NoiseParams, Verification, apply_edits,
                              candidates, choose, injector, pods_of, require_object, restart_edits)


class RollingRestartState(EditState):
    namespace: str = Field("", description="the Deployment's namespace")
    name: str = Field("", description="the Deployment restarted")
    stamp: str = Field("", description="the restart annotation's value (marks the new pods)")


@injector("noise_rolling_restart")
class NoiseRollingRestart(Injector[NoiseParams]):
    """Roll the pods of one Deployment (not one a restart would cure: ``candidates``)."""

    Params = NoiseParams
    State = RollingRestartState

    def plan(self) -> RollingRestartState:
        dep = choose(self.ctx.seed, "noise_rolling_restart",
                     candidates(self.ctx, "Deployment", self.params.exclude, restarts=True), "deployment")
        edits = restart_edits(dep)
        return RollingRestartState(edits=edits, namespace=dep["metadata"]["namespace"], name=dep["metadata"]["name"],
                                   stamp=edits[0]["after"][RESTART_ANNOTATION])

    def inject(self, state: RollingRestartState) -> None:
        apply_edits(self.ctx.kube, state.edits)

    def verify(self, state: RollingRestartState) -> Verification:
        dep = require_object(self.ctx.kube, "Deployment", state.name, state.namespace)
        new = [p["metadata"]["name"] for p in pods_of(self.ctx.kube, dep)
               if (p["metadata"].get("annotations") or {}).get(RESTART_ANNOTATION) == state.stamp]
        return Verification(bool(new), f"restarted pods of {state.name}: {', '.join(new) or 'none yet'}")

    def recover(self, state: RollingRestartState) -> None:
        """Self-recovering: the rollout completes by itself (undoing it would restart the pods again)."""
