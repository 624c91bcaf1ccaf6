"""A problem's app values may change what a StatefulSet cannot update in place (shop_redis_disk_full
puts Redis's data on a memory-backed volume instead of a claim); deploying with other values
afterwards must still work, with the store's pod on the new volume."""

from __future__ import annotations

import pytest

from sregym.apps import deploy

pytestmark = pytest.mark.cluster


def _redis_volume(cluster) -> dict:
    pod = cluster.kube.core.read_namespaced_pod("shop-redis-0", "online-shop")
    vol = next(v for v in pod.spec.volumes if v.name == "data")
    return cluster.kube.core.api_client.sanitize_for_serialization(vol)


def test_switching_redis_between_a_claim_and_memory_and_back(cluster):
    deploy(cluster, "online-shop", timeout=900)
    try:
        memory = deploy(cluster, "online-shop", values={"redis": {"volume": "memory", "storage": "64Mi"}}, timeout=600)
        assert not memory.reused
        assert _redis_volume(cluster)["emptyDir"] == {"medium": "Memory", "sizeLimit": "64Mi"}
    finally:
        back = deploy(cluster, "online-shop", timeout=600)
    assert not back.reused
    assert _redis_volume(cluster)["persistentVolumeClaim"]["claimName"] == "data-shop-redis-0"
