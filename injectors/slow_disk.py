"""Slow disk: the calls with which the target's processes wait for their disk (fsync, fdatasync)
take a chosen extra time, as on a degraded or overloaded device, until recovered.

Mechanism ``ptrace-delay``: ``strace -f -e inject=fsync,fdatasync:delay_enter=USEC`` attached to
every process of the container by the same node-side supervisor as ``syscall_failure``'s ptrace
mechanism, which attaches again to each new instance of the container (a restarted database does
not get a new disk). Every such call is held that long before it runs, so a database's commits
(each waits for its WAL flush: ``fdatasync``) and checkpoints (``fsync`` of every file written) slow
down, and nothing fails. How faithful: a slow device also slows the reads that miss the page cache;
this delays only the calls named (page-cache hits stay fast, as they would), and tracing stops the
traced processes at every system call, which costs a little CPU on each. The kernel here has no
dm-delay (no device-mapper targets) and no eBPF override; this is the nearest real mechanism.
The run record names it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from injectors.syscall_failure import WORK_DIR, SyscallFailure, SyscallState, syscall_names
from sregym.injectors import Mechanism, injector

PTRACE_DELAY = Mechanism("ptrace-delay", "strace holds each of the container's disk-waiting calls (fsync, "
                         "fdatasync) for the delay before it runs", ("ptrace",))


class SlowDiskParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    delay_ms: int = Field(..., ge=1, le=60000, description="extra time each disk-waiting call takes")
    syscalls: list[str] = Field(["fsync", "fdatasync"], min_length=1,
                                description="the calls delayed (those that wait on the device)")

    @field_validator("syscalls")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return syscall_names(v)


def delay_argv(params: SlowDiskParams, token: str) -> list[str]:
    """The strace command line of the ptrace-delay mechanism (pids are appended by the supervisor)."""
    names = ",".join(params.syscalls)
    return ["strace", "-f", "-qq", "-o", f"{WORK_DIR}/{token}.trace", "-e", f"trace={names}",
            "-e", f"inject={names}:delay_enter={params.delay_ms * 1000}"]


@injector("slow_disk")
class SlowDisk(SyscallFailure):
    """Hold the target's fsync/fdatasync calls for a delay (ptrace); recover detaches the tracers."""

    Params = SlowDiskParams
    State = SyscallState
    mechanisms = (PTRACE_DELAY,)
    targets = ("Pod", "Deployment", "StatefulSet", "DaemonSet")
    node_level = True

    def tracer_argv(self, token: str) -> list[str]:
        return delay_argv(self.params, token)
