"""Command-line flags of a workload's container changed (e.g. a server started with a bad limit)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import ABSENT, Verification, WorkloadEdit, WorkloadEditState, injector, running_with


class StartupFlagsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flags: dict[str, str] = Field(..., min_length=1, description="flag -> value: the value after an existing "
                                  "flag is replaced, a missing flag is appended with its value")


def with_flags(args: list[str], flags: dict[str, str]) -> list[str]:
    """``args`` with each flag's value set (replaced where the flag is, appended where it is not)."""
    out = list(args)
    for flag, value in flags.items():
        if flag in out and out.index(flag) + 1 < len(out):
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


@injector("startup_flags")
class StartupFlags(WorkloadEdit[StartupFlagsParams]):
    """Set command-line flags of one container of a workload (rolls its pods); recover restores the args."""

    Params = StartupFlagsParams

    def plan(self) -> WorkloadEditState:
        def after(before: Any) -> list[str]:
            return with_flags(before if before != ABSENT else [], self.params.flags)

        return self.container_state("args", after)

    def verify(self, state: WorkloadEditState) -> Verification:
        def changed(c: dict) -> bool:
            args = c.get("args") or []
            return all(f in args and args.index(f) + 1 < len(args) and args[args.index(f) + 1] == v
                       for f, v in self.params.flags.items())

        hit = running_with(self.live_pods(state), state.container, changed)
        return Verification(bool(hit), f"pods running with the flags: {', '.join(hit) or 'none yet'}")
