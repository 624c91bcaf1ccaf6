"""Random packet loss on the target pod's traffic (iptables statistic match in its netns)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (Mechanism, NetnsState, PodNetworkFault, Verification, chain_script, injector,
                              random_drop_rules, unchain_script)

IPTABLES_RANDOM = Mechanism("iptables-statistic", "drop a random fraction of packets in the pod's netns",
                            ("iptables_statistic", "nsenter"))


class PacketLossParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    probability: float = Field(0.3, gt=0, le=1, description="fraction of packets dropped")
    direction: Literal["egress", "ingress", "both"] = "both"
    peer_cidr: str | None = Field(None, description="only traffic to/from this address or CIDR")
    probe_host: str | None = Field(None, description="verify: connect here if no traffic was seen yet")
    probe_port: int = 80


def hooks(direction: str) -> list[str]:
    return {"egress": ["OUTPUT"], "ingress": ["INPUT"], "both": ["OUTPUT", "INPUT"]}[direction]


@injector("packet_loss")
class PacketLoss(PodNetworkFault[PacketLossParams]):
    """Drop a random fraction of the target pod's packets."""

    Params = PacketLossParams
    mechanisms = (IPTABLES_RANDOM,)

    def plan(self) -> NetnsState:
        # a lossy link: the pod's loopback (itself, its sidecars) loses nothing
        rules = random_drop_rules(self.params.probability, self.params.peer_cidr)
        return self.plan_target(hooks=hooks(self.params.direction), rules=rules)

    def inject(self, state: NetnsState) -> None:
        self.in_netns(state, chain_script(state.chain, state.hooks, state.rules))

    def verify(self, state: NetnsState) -> Verification:
        if self.chain_counters(state) == 0 and self.params.probe_host:
            self.probe_traffic(state, self.params.probe_host, self.params.probe_port, tries=10)
        return self.counted(state, "dropped")

    def recover(self, state: NetnsState) -> None:
        self.in_netns(state, unchain_script(state.chain, state.hooks), check=False)
