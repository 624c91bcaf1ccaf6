"""Command-line flags of a workload's container changed (e.g. a server started with a bad limit).

The newcomer's primitive of issue 17, since become the built-in ``container_args``: its flag
arithmetic now comes from there (one copy of it); the primitive itself stays the newcomer's."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from injectors.container_args import with_flags
from sregym.injectors import ABSENT, Verification, WorkloadEdit, WorkloadEditState, injector, running_with


class StartupFlagsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flags: dict[str, str] = Field(..., min_length=1, description="flag -> value: the value after an existing "
                                  "flag is replaced, a missing flag is appended with its value")


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
