"""The shop's lb (nginx) follows its upstream Service to a new ClusterIP: ``web``'s Service deleted
and created again from its own spec, and web's pod restarted (as a fix that re-creates web leaves
them, or a namespace re-created while DNS still answers the old address), is served through lb
again within CoreDNS's cache time plus nginx's ``valid=``, with no lb restart. An nginx that
resolved ``web`` once at start keeps dialling the dead ClusterIP while every pod is ready (until
web's pod goes, its kept-alive connections still reach it through their conntrack entries: that is
why the test restarts it)."""

from __future__ import annotations

import json
import time
from collections import Counter

import httpx
import pytest

from sregym.apps import deploy

pytestmark = pytest.mark.cluster

NAMESPACE = "online-shop"
# CoreDNS here and in a kubeadm cluster answers with TTL 30 and caches 30 s; lb keeps an answer
# 5 s (valid=5s): a new address is reached within ~35 s of the Service's re-creation
SERVED_AGAIN_WITHIN = 45.0


def _cluster_ip(cluster, name: str) -> str:
    return cluster.kube.core.read_namespaced_service(name, NAMESPACE).spec.cluster_ip


def _home_page(url: str) -> int | str:
    try:
        return httpx.get(url, timeout=5).status_code
    except httpx.HTTPError as e:
        return type(e).__name__


def _recreate_with_a_new_cluster_ip(cluster, name: str) -> None:
    doc = json.loads(cluster.kube.kubectl("-n", NAMESPACE, "get", "service", name, "-o", "json").stdout)
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        doc["metadata"].pop(key, None)
    for key in ("clusterIP", "clusterIPs"):
        doc["spec"].pop(key, None)
    doc.pop("status", None)
    cluster.kube.kubectl("-n", NAMESPACE, "delete", "service", name, "--wait=true")
    cluster.kube.kubectl("-n", NAMESPACE, "create", "-f", "-", input=json.dumps(doc))


def _ready_pods(cluster, name: str) -> set[str]:
    pods = cluster.kube.core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={name}").items
    return {p.metadata.name for p in pods if p.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])}


def _restart(cluster, name: str, timeout: float = 90) -> None:
    """Delete ``name``'s pods and wait for a new one to be ready (its kept-alive connections go with them)."""
    old = _ready_pods(cluster, name)
    cluster.kube.kubectl("-n", NAMESPACE, "delete", "pod", "-l", f"app.kubernetes.io/name={name}", "--wait=true")
    deadline = time.monotonic() + timeout
    while not _ready_pods(cluster, name) - old:
        assert time.monotonic() < deadline, f"no new {name} pod ready within {timeout:.0f}s"
        time.sleep(1)


def test_lb_serves_the_shop_again_after_web_service_gets_a_new_cluster_ip(cluster):
    deploy(cluster, "online-shop", timeout=900)
    url = f"http://{_cluster_ip(cluster, 'lb')}:8080/"
    assert _home_page(url) == 200
    old_ip = _cluster_ip(cluster, "web")
    _recreate_with_a_new_cluster_ip(cluster, "web")
    new_ip = _cluster_ip(cluster, "web")
    assert new_ip != old_ip
    recreated = time.monotonic()
    try:
        _restart(cluster, "web")
        started, answers, ok_in_a_row = time.monotonic(), [], 0
        while ok_in_a_row < 3 and time.monotonic() - started < SERVED_AGAIN_WITHIN:
            answers.append(_home_page(url))
            ok_in_a_row = ok_in_a_row + 1 if answers[-1] == 200 else 0
            time.sleep(1)
        assert ok_in_a_row == 3, (
            f"lb did not serve the home page again within {time.monotonic() - started:.0f}s of web's new pod being "
            f"ready ({started - recreated:.0f}s after its Service moved {old_ip} -> {new_ip}): "
            f"answers {dict(Counter(answers))}")
        print(f"lb served the home page again {time.monotonic() - recreated:.0f}s after web's Service moved "
              f"({started - recreated:.0f}s of it web's pod restarting): answers {dict(Counter(answers))}")
    finally:
        if _home_page(url) != 200:  # leave the shop serving: a fresh nginx resolves the new address
            _restart(cluster, "lb")
