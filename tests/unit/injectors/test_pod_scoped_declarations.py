"""Which primitives declare that their fault dies with the pod (so the fault plane re-applies it to
the target's new pods), by mechanism: the table in docs/injectors.md."""

from __future__ import annotations

import pytest

from sregym.core.problem import Selector
from sregym.injectors import INJECTORS, FaultContext

EXPECTED = {
    ("network_partition", "iptables-drop"): True,
    ("packet_loss", "iptables-statistic"): True,
    ("network_latency", "netem"): True,
    ("network_latency", "nfqueue-delay"): True,
    ("network_latency", "tbf-queueing"): True,
    ("bandwidth_limit", "tbf"): True,
    ("dns_failure", "iptables-dns-drop"): True,
    ("network_policy_deny", "networkpolicy"): False,
    ("network_policy_deny", "iptables-egress-drop"): True,
    ("resource_stress", "stress-ng-in-cgroup"): True,
    ("resource_stress", "stress-ng-on-node"): False,
    ("syscall_failure", "ptrace"): True,
    ("syscall_failure", "ebpf-override"): True,
    ("syscall_failure", "seccomp"): False,
    ("disk_full", "fill-volume"): True,
    ("credential_rotation", "redis-config-set"): True,
    ("credential_rotation", "postgres-alter-user"): False,
    ("process_signal", "signal-from-node"): False,
    ("pod_kill", "kubernetes-api"): False,
    ("env_var", "kubernetes-api"): False,
    ("container_args", "kubernetes-api"): False,
    ("config_value", "kubernetes-api"): False,
}


def injector_with(name: str, mechanism: str):
    cls = INJECTORS.get(name)
    chosen = {m.name: m for m in cls.mechanisms}[mechanism]
    ctx = FaultContext(kube=None, app_namespace="app", hidden_namespace="hidden")
    return cls(cls.Params.model_construct(), Selector(kind="Deployment", name="x"), ctx, chosen)


@pytest.mark.parametrize(("name", "mechanism"), sorted(EXPECTED), ids=[f"{n}-{m}" for n, m in sorted(EXPECTED)])
def test_pod_scoped_by_mechanism(name: str, mechanism: str):
    assert injector_with(name, mechanism).dies_with_pod() is EXPECTED[(name, mechanism)]


def test_carrier_pods_come_from_the_planned_state():
    partition = injector_with("network_partition", "iptables-drop")
    assert partition.carrier_pods(partition.load_state({"container": {"pod_uid": "u1", "pod": "api-1"}})) == {"u1"}
    assert partition.carrier_pods(partition.load_state({})) == set()
    assert (rotation := injector_with("credential_rotation", "redis-config-set")).carrier_pods(rotation.load_state({"pod_uid": "u2"})) == {"u2"}
