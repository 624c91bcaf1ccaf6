"""Resource limits too low: memory (OOM kills) or CPU (throttling)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sregym.injectors import (ABSENT, Verification, WorkloadEdit, WorkloadEditState, injector, running_with,
                              terminated_reasons)

CPU_STAT_FILES = "cat /sys/fs/cgroup/cpu.stat 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.stat"


class ResourceLimitsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    memory: str | None = Field(None, description="new memory limit, e.g. 16Mi (OOM kills)")
    cpu: str | None = Field(None, description="new CPU limit, e.g. 10m (throttling)")

    @model_validator(mode="after")
    def _one(self) -> ResourceLimitsParams:
        if not self.memory and not self.cpu:
            raise ValueError("give memory, cpu or both")
        return self


def throttled_periods(stat: str) -> int:
    """``nr_throttled`` from a cgroup cpu.stat text (v1 and v2 both name it so)."""
    for line in stat.splitlines():
        if line.startswith("nr_throttled "):
            return int(line.split()[1])
    return 0


@injector("resource_limits")
class ResourceLimits(WorkloadEdit[ResourceLimitsParams]):
    """Lower a container's memory and/or CPU limit (requests are lowered with it so the pod stays valid)."""

    Params = ResourceLimitsParams

    def plan(self) -> WorkloadEditState:
        def after(before: Any) -> dict:
            res = {k: dict(v) for k, v in (before if before != ABSENT else {}).items() if v}
            for key, value in (("memory", self.params.memory), ("cpu", self.params.cpu)):
                if value:
                    res.setdefault("limits", {})[key] = value
                    res.setdefault("requests", {})[key] = value
            return res

        return self.container_state("resources", after)

    def verify(self, state: WorkloadEditState) -> Verification:
        limits = state.edits[0]["after"]["limits"]
        pods = self.live_pods(state)
        mine = [p for p in pods if running_with([p], state.container,
                                                 lambda c: limits.items() <= ((c.get("resources") or {}).get("limits") or {}).items())]
        if not mine:
            return Verification(False, "no pod runs with the new limits yet")
        notes, ok = [], True
        if self.params.memory:
            oom = "OOMKilled" in terminated_reasons(mine)
            notes.append("OOMKilled seen" if oom else "no OOM kill yet")
            ok = ok and oom
        if self.params.cpu:
            throttled = max(self._throttled(p, state.container) for p in mine)
            notes.append(f"nr_throttled={throttled}")
            ok = ok and throttled > 0
        return Verification(ok, "; ".join(notes))

    def _throttled(self, pod: dict, container: str) -> int:
        proc = self.ctx.kube.kubectl("exec", "-n", pod["metadata"]["namespace"], pod["metadata"]["name"], "-c",
                                     container, "--", "sh", "-c", CPU_STAT_FILES, check=False, timeout=30)
        return throttled_periods(proc.stdout)
