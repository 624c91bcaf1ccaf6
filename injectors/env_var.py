"""Environment variable removed or changed in a workload's container."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import ABSENT, Verification, WorkloadEdit, WorkloadEditState, injector, running_with


class EnvVarParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="environment variable name")
    value: str | None = Field(None, description="new value; None removes the variable")


@injector("env_var")
class EnvVar(WorkloadEdit[EnvVarParams]):
    """Remove or change one environment variable of a workload's container (rolls its pods)."""

    Params = EnvVarParams

    def plan(self) -> WorkloadEditState:
        def after(before: Any) -> list[dict]:
            env = [e for e in (before if before != ABSENT else []) if e["name"] != self.params.name]
            return env + ([{"name": self.params.name, "value": self.params.value}] if self.params.value is not None else [])

        return self.container_state("env", after)

    def verify(self, state: WorkloadEditState) -> Verification:
        def changed(c: dict) -> bool:
            env = {e["name"]: e.get("value") for e in c.get("env") or []}
            if self.params.value is None:
                return self.params.name not in env
            return env.get(self.params.name) == self.params.value

        hit = running_with(self.live_pods(state), state.container, changed)
        return Verification(bool(hit), f"pods running with the change: {', '.join(hit) or 'none yet'}")
