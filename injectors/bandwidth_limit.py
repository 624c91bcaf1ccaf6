"""Bandwidth limit on the target pod's egress (tbf qdisc in its netns)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (Mechanism, NetnsState, PodNetworkFault, Verification, clear_root_script, injector,
                              root_qdisc_script, tbf_script)

TBF = Mechanism("tbf", "token bucket filter as the root qdisc of the pod's interface", ("tbf", "nsenter"))


class BandwidthParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rate: str = Field("1mbit", description="tc rate, e.g. 256kbit, 1mbit")
    burst: str = Field("32kbit", description="bucket size")
    latency: str = Field("400ms", description="longest a packet may wait in the queue before it is dropped")


class BandwidthState(NetnsState):
    qdisc_before: str = Field("", description="the pod's root qdisc before the limit")


@injector("bandwidth_limit")
class BandwidthLimit(PodNetworkFault[BandwidthParams]):
    """Limit the rate at which the target pod can send."""

    Params = BandwidthParams
    State = BandwidthState
    mechanisms = (TBF,)

    def plan(self) -> BandwidthState:
        state = self.plan_target()
        state.qdisc_before = (self.in_netns(state, root_qdisc_script()) or "").split("\n")[0]
        return state

    def inject(self, state: BandwidthState) -> None:
        self.in_netns(state, tbf_script(self.params.rate, self.params.burst, self.params.latency))

    def verify(self, state: BandwidthState) -> Verification:
        out = (self.in_netns(state, root_qdisc_script(), check=False) or "").strip()
        return Verification(out.startswith("qdisc tbf") and f"RATE {self.params.rate.upper()}" in out.upper(),
                            out.strip().splitlines()[0] if out.strip() else "pod gone")

    def recover(self, state: BandwidthState) -> None:
        self.in_netns(state, clear_root_script(), check=False)
