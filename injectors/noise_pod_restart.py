"""Noise: one pod restarts (deleted; its controller replaces it), the root cause's too unless a
restart would cure its fault."""

from __future__ import annotations

from pydantic import Field

from sregym.injectors import (Injector, NoiseParams, PlannedState, Verification, candidates, choose, get_object,
                              injector, resource, running)


class PodRestartState(PlannedState):
    namespace: str = Field("", description="the pod's namespace")
    pod: str = Field("", description="the pod deleted")
    uid: str = Field("", description="its UID (a replacement of the same name is left alone)")


@injector("noise_pod_restart")
class NoisePodRestart(Injector[NoiseParams]):
    """Restart one running pod (not one a restart would cure: ``candidates``)."""

    Params = NoiseParams
    State = PodRestartState

    def plan(self) -> PodRestartState:
        pods = [p for p in running(candidates(self.ctx, "Pod", self.params.exclude, restarts=True))
                if (p["metadata"].get("ownerReferences") or [])]  # only pods a controller brings back
        pod = choose(self.ctx.seed, "noise_pod_restart", pods, "pod")
        return PodRestartState(namespace=pod["metadata"]["namespace"], pod=pod["metadata"]["name"],
                               uid=pod["metadata"]["uid"])

    def inject(self, state: PodRestartState) -> None:
        obj = get_object(self.ctx.kube, "Pod", state.pod, state.namespace)
        if obj and obj["metadata"]["uid"] == state.uid:
            resource(self.ctx.kube, "Pod").delete(name=state.pod, namespace=state.namespace,
                                                  body={"preconditions": {"uid": state.uid}})

    def verify(self, state: PodRestartState) -> Verification:
        obj = get_object(self.ctx.kube, "Pod", state.pod, state.namespace)
        gone = obj is None or obj["metadata"]["uid"] != state.uid or bool(obj["metadata"].get("deletionTimestamp"))
        return Verification(gone, f"pod {state.pod} {'restarting' if gone else 'still running'}")

    def recover(self, state: PodRestartState) -> None:
        """Self-recovering: the pod's controller replaces it."""
