"""Noise: one pod of an unrelated workload restarts (deleted; its controller replaces it)."""

from __future__ import annotations

from typing import Any

from sregym.injectors import (Injector, NoiseParams, Verification, candidates, choose, get_object, injector, resource,
                              running)


@injector("noise_pod_restart")
class NoisePodRestart(Injector[NoiseParams]):
    """Restart one running pod outside the excluded components."""

    Params = NoiseParams

    def plan(self) -> dict[str, Any]:
        pods = [p for p in running(candidates(self.ctx, "Pod", self.params.exclude))
                if (p["metadata"].get("ownerReferences") or [])]  # only pods a controller brings back
        pod = choose(self.ctx.seed, "noise_pod_restart", pods, "pod")
        return {"namespace": pod["metadata"]["namespace"], "pod": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"]}

    def inject(self, state: dict[str, Any]) -> None:
        obj = get_object(self.ctx.kube, "Pod", state["pod"], state["namespace"])
        if obj and obj["metadata"]["uid"] == state["uid"]:
            resource(self.ctx.kube, "Pod").delete(name=state["pod"], namespace=state["namespace"],
                                                  body={"preconditions": {"uid": state["uid"]}})

    def verify(self, state: dict[str, Any]) -> Verification:
        obj = get_object(self.ctx.kube, "Pod", state["pod"], state["namespace"])
        gone = obj is None or obj["metadata"]["uid"] != state["uid"] or bool(obj["metadata"].get("deletionTimestamp"))
        return Verification(gone, f"pod {state['pod']} {'restarting' if gone else 'still running'}")

    def recover(self, state: dict[str, Any]) -> None:
        """Self-recovering: the pod's controller replaces it."""
