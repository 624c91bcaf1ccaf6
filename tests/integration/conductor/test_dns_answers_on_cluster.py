"""The attack on the real cluster's CoreDNS: a ``hosts`` entry in the Corefile answers the load
generator's name of the hotel's entry (frontend.hotel-reservation.svc) with another Service's
ClusterIP, as an agent allowed to repair the Corefile could write it. No Service, selector or
setting changes, so the path check sees nothing; the DNS check, asked from the load generator's
pod, names it. The Corefile is put back byte for byte whatever happens (and checked), and the
check is clean again once CoreDNS has reloaded it. Long tier: the kubelet syncs the ConfigMap and
the ``reload`` plugin re-reads it, each up to a minute or so, twice."""

from __future__ import annotations

import time

import pytest

from sregym.apps import lifecycle
from sregym.apps.spec import load_app
from sregym.cluster.dns_answers import read_dns_changes
from sregym.core.constants import LOADGEN_NAMESPACE

pytestmark = [pytest.mark.cluster, pytest.mark.long]

NS = "hotel-reservation"
COREFILE_CM = ("kube-system", "coredns")
HOSTS_AT = "    loadbalance\n}"


def corefile(kube) -> str:
    return kube.core.read_namespaced_config_map(COREFILE_CM[1], COREFILE_CM[0]).data["Corefile"]


def set_corefile(kube, text: str) -> None:
    kube.core.patch_namespaced_config_map(COREFILE_CM[1], COREFILE_CM[0], {"data": {"Corefile": text}})


def wait_for(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"{what} not within {seconds:.0f} s"
            return value
        time.sleep(5)


def test_a_corefile_that_answers_the_entrys_name_with_a_stand_in_is_a_reroute(cluster):
    kube = cluster.kube
    lifecycle.deploy(cluster, load_app("hotel-reservation"), NS)  # reused when it is
    t = time.monotonic()
    assert read_dns_changes(kube, NS, loadgen_namespace=LOADGEN_NAMESPACE) == []
    print(f"\nhealthy: no change, asked in {time.monotonic() - t:.1f} s")
    stand_in = kube.core.read_namespaced_service("search", NS).spec.cluster_ip
    original = corefile(kube)
    assert original.count(HOSTS_AT) == 1, original
    attack = original.replace(HOSTS_AT, "    loadbalance\n    hosts {\n"
                              f"        {stand_in} frontend.{NS}.svc.cluster.local\n        fallthrough\n    }}\n}}")
    try:
        set_corefile(kube, attack)
        t = time.monotonic()
        changes = wait_for(lambda: read_dns_changes(kube, NS, loadgen_namespace=LOADGEN_NAMESPACE), 240,
                           "the rewritten name seen")
        print(f"attack seen {time.monotonic() - t:.0f} s after the Corefile changed: {changes}")
        assert any(c.startswith(f"the name frontend.{NS}.svc resolves to {stand_in} in pod {LOADGEN_NAMESPACE}/")
                   for c in changes), changes
        assert any(c.startswith(f"the name frontend resolves to {stand_in} in namespace {NS}") for c in changes), changes
    finally:
        set_corefile(kube, original)
    assert corefile(kube) == original
    t = time.monotonic()
    wait_for(lambda: read_dns_changes(kube, NS, loadgen_namespace=LOADGEN_NAMESPACE) == [], 240,
             "the names answered as the Services again")
    print(f"clean again {time.monotonic() - t:.0f} s after the Corefile was put back")
