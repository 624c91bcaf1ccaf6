"""Command-line flags of a workload's container changed (a server started with a bad limit or policy)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import ABSENT, Verification, WorkloadEdit, WorkloadEditState, injector, running_with


class ContainerArgsParams(BaseModel):
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


def has_flags(args: list[str], flags: dict[str, str]) -> bool:
    """Whether every flag in ``args`` is followed by its value."""
    return with_flags(args, flags) == args


@injector("container_args")
class ContainerArgs(WorkloadEdit[ContainerArgsParams]):
    """Set command-line flags of one container of a workload (rolls its pods); recover restores its args.

    The change lives in the workload's pod template, so it persists across pod restarts as a bad
    deploy does; recover puts the original ``args`` back (or removes them if there were none)."""

    Params = ContainerArgsParams

    def plan(self) -> WorkloadEditState:
        return self.container_state("args", lambda before: with_flags(before if before != ABSENT else [],
                                                                      self.params.flags))

    def verify(self, state: WorkloadEditState) -> Verification:
        hit = running_with(self.live_pods(state), state.container,
                           lambda c: has_flags(c.get("args") or [], self.params.flags))
        return Verification(bool(hit), f"pods running with the flags: {', '.join(hit) or 'none yet'}")
