"""Node leases on the real API server: one holder at a time, all or none, given back on release."""

import pytest

from sregym.conductor.node_leases import NodeLeases, lease_name


@pytest.mark.cluster
def test_two_holders_never_hold_one_node_and_release_frees_it(cluster):
    leases = NodeLeases(cluster.kube, duration_s=30)
    leases.ensure_namespace()
    node = leases.nodes()[0]
    first = leases.acquire_all([node], "test/first")
    try:
        assert first is not None
        assert leases.holder_of(node) == "test/first"
        assert leases.acquire_all([node], "test/second") is None
        assert leases.acquire(node, "test/first")  # renewing one's own lease works
    finally:
        first.release()
    assert leases.holder_of(node) is None
    second = leases.acquire_all([node], "test/second")
    assert second is not None
    second.release()


@pytest.mark.cluster
def test_all_or_none_gives_back_what_it_took(cluster):
    leases = NodeLeases(cluster.kube, duration_s=30)
    leases.ensure_namespace()
    node = leases.nodes()[0]
    blocker = leases.acquire_all(["zz-not-a-real-node"], "test/blocker")
    try:
        assert leases.acquire_all([node, "zz-not-a-real-node"], "test/both") is None
        assert leases.holder_of(node) is None  # the lease it took first was given back
    finally:
        blocker.release()
    api = leases.api
    assert lease_name("zz-not-a-real-node") not in [
        item.metadata.name for item in api.list_namespaced_lease(leases.namespace).items]
