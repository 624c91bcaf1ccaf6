"""Noise: a brief loss burst on one pod's traffic (the root cause's too), removed by itself after ``duration``."""

from __future__ import annotations

import shlex
from pydantic import Field

from sregym.injectors import (Injector, Mechanism, NoiseParams, PlannedState, Selector, Verification, candidates,
                              chain_name, chain_script, choose, injector, kill_spawned, node_runner, pick_container,
                              pids_with_cmdline, random_drop_rules, running, target_pid, unchain_script)

BLIP = Mechanism("iptables-statistic", "random loss in the pod's netns that removes itself", ("iptables_statistic", "nsenter"))


class BlipParams(NoiseParams):
    probability: float = Field(0.2, gt=0, le=1)


class BlipState(PlannedState):
    node: str = Field("", description="the node of the pod")
    pod: str = Field("", description="the pod whose network blips")
    pid: int | None = Field(None, description="a process in the pod's network namespace")
    chain: str = Field("", description="our iptables chain")
    rules: list[str] = Field(default_factory=list, description="its rules")


@injector("noise_network_blip")
class NoiseNetworkBlip(Injector[BlipParams]):
    """Drop a fraction of one pod's packets for ``duration`` seconds, in a chain of its own."""

    Params = BlipParams
    State = BlipState
    mechanisms = (BLIP,)
    node_level = True

    def plan(self) -> BlipState:
        # the root cause's pod too: its fault's rules live in chains (or a qdisc) of their own, which
        # this chain's removal never touches, and lost packets add to a fault without curing it
        pods = running(candidates(self.ctx, "Pod", self.params.exclude, harmless=True))
        pod = choose(self.ctx.seed, "noise_network_blip", pods, "pod")
        tc = pick_container(self.ctx, Selector(kind="Pod", name=pod["metadata"]["name"],
                                               namespace=pod["metadata"]["namespace"]))
        _, pid = target_pid(self.ctx, tc)
        chain = chain_name(f"{tc.pod_uid}:blip:{self.ctx.seed}")
        rules = random_drop_rules(self.params.probability)  # a lossy link: the loopback loses nothing
        return BlipState(node=tc.node, pod=tc.pod, pid=pid, chain=chain, rules=rules)

    def _netns(self, state: BlipState, script: str) -> list[str]:
        return ["nsenter", "-t", str(state.pid), "-n", "--", "sh", "-c", script]

    def inject(self, state: BlipState) -> None:
        runner = node_runner(self.ctx, state.node)
        hooks = ["OUTPUT", "INPUT"]
        script = (f"{chain_script(state.chain, hooks, state.rules)}; sleep {int(self.params.duration)}; "
                  f"{unchain_script(state.chain, hooks)}")
        runner.run(["sh", "-c", f"setsid {shlex.join(self._netns(state, script))} >/dev/null 2>&1 </dev/null &"])

    def verify(self, state: BlipState) -> Verification:
        runner = node_runner(self.ctx, state.node)
        out = runner.run(self._netns(state, f"iptables -w -S {state.chain}"), check=False).stdout
        return Verification("statistic" in out, f"loss rule on {state.pod}: {'present' if 'statistic' in out else 'absent'}")

    def recover(self, state: BlipState) -> None:
        runner = node_runner(self.ctx, state.node)
        for pid, start in pids_with_cmdline(runner, state.chain):
            kill_spawned(runner, pid, start)
        runner.run(self._netns(state, unchain_script(state.chain, ["OUTPUT", "INPUT"])), check=False)
