"""Liveness or readiness probe pointed at a port nothing listens on."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import Verification, WorkloadEdit, WorkloadEditState, injector, ready, restarts, running_with


class ProbeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    probe: Literal["readiness", "liveness"] = "readiness"
    port: int = Field(1, ge=1, le=65535, description="the port the broken probe checks (nothing listens there)")
    path: str | None = Field(None, description="probe with HTTP GET on this path instead of a TCP connect")


@injector("probe_misconfig")
class ProbeMisconfig(WorkloadEdit[ProbeParams]):
    """Misconfigure a container's readiness (pods never ready) or liveness probe (restart loop)."""

    Params = ProbeParams

    def _probe(self) -> dict:
        check = {"httpGet": {"path": self.params.path, "port": self.params.port}} if self.params.path \
            else {"tcpSocket": {"port": self.params.port}}
        return {**check, "periodSeconds": 3, "timeoutSeconds": 1, "failureThreshold": 2}

    def plan(self) -> WorkloadEditState:
        return self.container_state(f"{self.params.probe}Probe", lambda before: self._probe())

    def verify(self, state: WorkloadEditState) -> Verification:
        field = f"{self.params.probe}Probe"
        want = state.edits[0]["after"]
        # the API server fills in defaults (successThreshold ...): ours is the probe if it has our fields
        names = set(running_with(self.live_pods(state), state.container,
                                 lambda c: want.items() <= (c.get(field) or {}).items()))
        pods = [p for p in self.live_pods(state) if p["metadata"]["name"] in names]
        if self.params.probe == "readiness":
            bad = [p["metadata"]["name"] for p in pods if not ready(p)]
            return Verification(bool(bad), f"pods not ready under the probe: {', '.join(bad) or 'none'}")
        n = restarts(pods)
        return Verification(n > 0, f"restarts under the probe: {n}")
