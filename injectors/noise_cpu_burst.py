"""Noise: a short CPU burst by a node-level process (not in any app container)."""

from __future__ import annotations

import time
from pydantic import Field

from sregym.injectors import (WORK_DIR, Injector, Mechanism, NoiseParams, PlannedState, Verification, choose, cpu_ticks,
                              injector, kill_spawned, list_objects, node_runner, pids_with_cmdline, poll,
                              start_in_cgroups, stress_argv, token)

STRESS = Mechanism("stress-ng-on-node", "stress-ng with --timeout on a node", ("stress_ng",))


class CpuBurstState(PlannedState):
    node: str = Field("", description="the node that burns CPU")
    token: str = Field("", description="names the burner's processes (to find and stop them)")


@injector("noise_cpu_burst")
class NoiseCpuBurst(Injector[NoiseParams]):
    """Burn about half a CPU on one (seeded) node for ``duration`` seconds."""

    Params = NoiseParams
    State = CpuBurstState
    mechanisms = (STRESS,)
    node_level = True

    def plan(self) -> CpuBurstState:
        nodes = sorted(n["metadata"]["name"] for n in list_objects(self.ctx.kube, "Node", None)
                       if n["metadata"]["name"] not in self.params.exclude)
        node = choose(self.ctx.seed, "noise_cpu_burst", nodes, "node")
        return CpuBurstState(node=node, token=token("cpu", node, self.ctx.seed))

    def inject(self, state: CpuBurstState) -> None:
        runner = node_runner(self.ctx, state.node)
        if not pids_with_cmdline(runner, state.token):
            argv = stress_argv("cpu", 1, 50, "0", self.params.duration, state.token)
            start_in_cgroups(runner, argv, [], f"{WORK_DIR}/{state.token}.log")
            poll(lambda: pids_with_cmdline(runner, state.token), 10, 0.2)

    def verify(self, state: CpuBurstState) -> Verification:
        runner = node_runner(self.ctx, state.node)
        before = cpu_ticks(runner, state.token)
        time.sleep(1)
        burned = cpu_ticks(runner, state.token) - before
        return Verification(burned > 0, f"{burned} CPU ticks in 1s on {state.node}")

    def recover(self, state: CpuBurstState) -> None:
        runner = node_runner(self.ctx, state.node)
        for pid, start in pids_with_cmdline(runner, state.token):
            kill_spawned(runner, pid, start)
