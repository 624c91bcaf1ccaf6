"""Network partition between the target's pod and another service (iptables in the pod's netns)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (Mechanism, NetnsState, PodNetworkFault, UserInputError, Verification, chain_script,
                              get_object, injector, list_objects, namespace_of, unchain_script)

IPTABLES_DROP = Mechanism("iptables-drop", "drop every packet to and from the peer in the pod's netns",
                          ("iptables", "nsenter"))


class PartitionParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    peer_service: str = Field(..., description="the Service on the other side of the partition")
    peer_namespace: str | None = Field(None, description="default: the target's namespace")
    reject: bool = Field(False, description="answer with a TCP reset / ICMP error instead of silence")


class PartitionState(NetnsState):
    peer_ips: list[str] = Field(default_factory=list, description="addresses of the peer service and its pods")
    peer_port: int | None = Field(None, description="the peer service's first port (to probe)")


@injector("network_partition")
class NetworkPartition(PodNetworkFault[PartitionParams]):
    """Cut the target pod off from a peer Service: its ClusterIP and every pod behind it."""

    Params = PartitionParams
    State = PartitionState
    mechanisms = (IPTABLES_DROP,)

    def plan(self) -> PartitionState:
        ns = self.params.peer_namespace or namespace_of(self.ctx, self.target)
        svc = get_object(self.ctx.kube, "Service", self.params.peer_service, ns)
        if svc is None:
            raise UserInputError(f"params.peer_service: Service {ns}/{self.params.peer_service} does not exist")
        ips = {ip for ip in svc["spec"].get("clusterIPs") or [svc["spec"].get("clusterIP")] if ip and ip != "None"}
        for s in list_objects(self.ctx.kube, "EndpointSlice", ns, {"kubernetes.io/service-name": svc["metadata"]["name"]}):
            for ep in s.get("endpoints") or []:
                ips.update(ep.get("addresses") or [])
        if not ips:
            raise UserInputError(f"params.peer_service: Service {ns}/{self.params.peer_service} has no address")
        action = "REJECT" if self.params.reject else "DROP"
        rules = [r for ip in sorted(ips) for r in (f"-d {ip} -j {action}", f"-s {ip} -j DROP")]
        return self.plan_target(hooks=["OUTPUT", "INPUT"], rules=rules, peer_ips=sorted(ips),
                                peer_port=(svc["spec"].get("ports") or [{"port": 80}])[0]["port"])

    def inject(self, state: PartitionState) -> None:
        self.in_netns(state, chain_script(state.chain, state.hooks, state.rules))

    def verify(self, state: PartitionState) -> Verification:
        if self.chain_counters(state) == 0:
            self.probe_traffic(state, state.peer_ips[0], state.peer_port, tries=2)
        return self.counted(state, f"packets to/from {self.params.peer_service} dropped")

    def recover(self, state: PartitionState) -> None:
        self.in_netns(state, unchain_script(state.chain, state.hooks), check=False)
