"""A NetworkPolicy that denies the target's traffic to a dependency.

Where the network plugin enforces NetworkPolicy, the policy itself is the fault (an agent finds it
with `kubectl get networkpolicy`). Where it does not (e.g. the bridge plugin of the local
cluster), the object would change nothing, so the same cut is made with iptables in the target
pod's netns instead and the record names that mechanism.
"""

from __future__ import annotations

import shlex
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (FaultError, Mechanism, NetnsState, PodNetworkFault, UserInputError, Verification,
                              chain_script, create_object, delete_object, get_object, injector, namespace_of,
                              running_pods, unchain_script)

CONNECT = ("import socket,sys\ns=socket.socket();s.settimeout(2)\n"
           "try:\n s.connect((sys.argv[1],int(sys.argv[2])));print('open')\nexcept OSError:\n print('blocked')\n")
POLICY = Mechanism("networkpolicy", "an egress NetworkPolicy on the target's pods that leaves out the dependency",
                   ("network_policy_enforcement",))
RECOVER_WAIT_S = 30.0
IPTABLES = Mechanism("iptables-egress-drop", "drop the target pod's packets to the dependency in its netns "
                     "(where NetworkPolicy is not enforced)", ("iptables", "nsenter"))


def every_pod_but(labels: dict[str, str]) -> list[dict[str, Any]]:
    """Egress peers that admit every pod of every namespace except those ``labels`` select: DNS and
    the other services keep working. One peer per label, since peers are ORed and the expressions
    of one selector ANDed: a single selector with every label ``NotIn`` would also leave out each
    pod sharing any one of them (e.g. the app's instance label, so every pod of the app)."""
    return [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [{"key": k, "operator": "NotIn",
                                                                             "values": [v]}]}}
            for k, v in sorted(labels.items())]


class NetworkPolicyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dependency: str = Field(..., description="the Service the target can no longer reach")
    name: str = Field("default-egress", description="networkpolicy: name of the policy")


class PolicyDenyState(NetnsState):
    policy: dict[str, Any] | None = Field(None, description="the NetworkPolicy created (network_policy mechanism)")
    probe: list[Any] = Field(default_factory=list, description="[address, port] of the dependency, to probe")


@injector("network_policy_deny")
class NetworkPolicyDeny(PodNetworkFault[NetworkPolicyParams]):
    """Deny the target's egress to one dependency (NetworkPolicy where enforced, else iptables)."""

    Params = NetworkPolicyParams
    State = PolicyDenyState
    mechanisms = (POLICY, IPTABLES)

    def dies_with_pod(self) -> bool:
        """A NetworkPolicy selects new pods by itself; the iptables fallback is in one pod's netns."""
        return self.mechanism.name == IPTABLES.name

    def _dependency(self, ns: str) -> dict:
        svc = get_object(self.ctx.kube, "Service", self.params.dependency, ns)
        if svc is None:
            raise UserInputError(f"params.dependency: Service {ns}/{self.params.dependency} does not exist")
        return svc

    def plan(self) -> PolicyDenyState:
        ns = namespace_of(self.ctx, self.target)
        svc = self._dependency(ns)
        dep_labels = svc["spec"].get("selector") or {}
        if not dep_labels:
            raise UserInputError(f"params.dependency: Service {ns}/{self.params.dependency} selects no pods "
                                 "by labels, so no policy can leave them out")
        if self.mechanism.name == IPTABLES.name:
            state = self.plan_target()
            pods = running_pods(self.ctx, self.target.model_copy(update={"kind": None, "name": None,
                                                                         "labels": dep_labels}))
            ips = sorted({svc["spec"]["clusterIP"], *(p["status"]["podIP"] for p in pods)} - {None, "None"})
            state.rules = [f"-d {ip} -j DROP" for ip in ips]
            return state
        pod = running_pods(self.ctx, self.target)[0]
        own = {k: v for k, v in (pod["metadata"].get("labels") or {}).items() if k != "pod-template-hash"}
        policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                  "metadata": {"name": self.params.name, "namespace": ns,
                               "labels": dict(self.ctx.labels)},
                  "spec": {"podSelector": {"matchLabels": own}, "policyTypes": ["Egress"],
                           "egress": [{"to": every_pod_but(dep_labels)}]}}
        port = (svc["spec"].get("ports") or [{"port": 80}])[0]["port"]
        return self.plan_target(policy=policy, probe=[svc["spec"]["clusterIP"], port])

    def inject(self, state: PolicyDenyState) -> None:
        if state.policy is not None:
            create_object(self.ctx.kube, state.policy)
        else:
            self.in_netns(state, chain_script(state.chain, ["OUTPUT"], state.rules))

    def verify(self, state: PolicyDenyState) -> Verification:
        if state.policy is not None:  # observed: a connection from the pod to the dependency no longer opens
            out = self._connects(state)
            return Verification(out == "blocked", f"connection to {self.params.dependency}: {out}")
        if self.chain_counters(state) == 0:
            self.probe_traffic(state, state.rules[0].split()[1], 80, tries=2)
        return self.counted(state, f"packets to {self.params.dependency} dropped")

    def _connects(self, state: PolicyDenyState) -> str:
        """Whether a connection from a pod of the target, as it runs now, opens: the planned pod may
        be gone (the policy selects its replacements too), and probing from its namespace then
        answered nothing, or from whatever reused the namespace's id ("open" after a restart)."""
        ip, port = state.probe
        try:
            now = self.plan_target()
        except (UserInputError, FaultError) as e:
            return f"no running pod of the target to probe from ({e})"
        return (self.in_netns(now, f"python3 -c {shlex.quote(CONNECT)} {ip} {port}", check=False) or "").strip()

    def recover(self, state: PolicyDenyState) -> None:
        if state.policy is not None:
            m = state.policy["metadata"]
            delete_object(self.ctx.kube, "NetworkPolicy", m["name"], m["namespace"])
            # the policy engine takes the rules off a moment after the object goes: recovered means
            # the dependency answers again, observed as verify observed it cut (no pod to probe from ends the wait)
            deadline = time.monotonic() + RECOVER_WAIT_S
            while self._connects(state) == "blocked" and time.monotonic() < deadline:
                time.sleep(1)
        else:
            self.in_netns(state, unchain_script(state.chain, ["OUTPUT"]), check=False)
