"""Kill or pause (SIGSTOP) a process inside a container, from its node."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (FaultError, Injector, Mechanism, PlannedState, TargetContainer, Verification,
                              container_processes, injector, live_container_id, node_runner, pick_container,
                              process_starttime)

SIGNAL_FROM_NODE = Mechanism("signal-from-node", "send the signal from the node's PID namespace "
                             "(a container cannot SIGSTOP/SIGKILL its own init)", ("python3",))


class ProcessSignalParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["kill", "pause"] = "pause"
    process: str | None = Field(None, description="regex on the command line; default: the container's init")


class SignalState(PlannedState):
    container: dict[str, Any] = Field(default_factory=dict, description="the target (``TargetContainer``)")
    processes: list[tuple[int, str | None]] = Field(default_factory=list,
                                                     description="(pid, start time) of each process stopped")


@injector("process_signal")
class ProcessSignal(Injector[ProcessSignalParams]):
    """SIGKILL a process (a crash) or SIGSTOP it (a hang; recover sends SIGCONT)."""

    Params = ProcessSignalParams
    State = SignalState
    mechanisms = (SIGNAL_FROM_NODE,)
    targets = ("Pod", "Deployment", "StatefulSet", "DaemonSet")
    node_level = True

    @classmethod
    def ended_by_restart(cls, params: ProcessSignalParams) -> bool:
        """A paused process is gone with its pod (its replacement runs); a killed one was restarted anyway."""
        return params.action == "pause"

    def plan(self) -> SignalState:
        tc = pick_container(self.ctx, self.target)
        procs = container_processes(node_runner(self.ctx, tc.node), tc.container_id)
        if self.params.process:
            procs = [p for p in procs if re.search(self.params.process, p.cmdline or p.comm)]
        if not procs:
            raise FaultError(f"no process matching {self.params.process!r} in {tc.pod}/{tc.container}")
        chosen = procs if self.params.process else procs[:1]
        return SignalState(container=tc.as_state(), processes=[(p.pid, p.starttime) for p in chosen])

    def _alive(self, state: SignalState) -> list[tuple[int, str]]:
        runner = node_runner(self.ctx, state.container["node"])
        return [(pid, st) for pid, st in state.processes if process_starttime(runner, pid) == st]

    def inject(self, state: SignalState) -> None:
        runner = node_runner(self.ctx, state.container["node"])
        sig = "-KILL" if self.params.action == "kill" else "-STOP"
        for pid, _ in self._alive(state):
            runner.run(["kill", sig, str(pid)], check=False)

    def verify(self, state: SignalState) -> Verification:
        if self.params.action == "kill":
            alive = self._alive(state)
            return Verification(not alive, f"processes still alive: {len(alive)}")
        runner = node_runner(self.ctx, state.container["node"])
        cid = live_container_id(self.ctx, TargetContainer.from_state(state.container))
        procs = {p.pid: p for p in container_processes(runner, cid)} if cid else {}
        stopped = [pid for pid, st in state.processes if pid in procs and procs[pid].state == "T"
                   and procs[pid].starttime == st]
        return Verification(len(stopped) == len(state.processes), f"stopped (state T): {stopped}")

    def recover(self, state: SignalState) -> None:
        if self.params.action == "pause":
            runner = node_runner(self.ctx, state.container["node"])
            for pid, _ in self._alive(state):
                runner.run(["kill", "-CONT", str(pid)], check=False)
