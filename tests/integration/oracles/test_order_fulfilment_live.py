"""The worker's queue address, judged on the installed shop by the oracles of
shop_concurrent_pool_leak_and_worker_queue: an order placed now must be fulfilled (the
``http_probe`` journey) and the worker's rollout complete (``workload_health``). A wrong address
stalls the rollout (the new pod never gets ready; the old one consumes on), so workload_health
fails for the fault's port and for any other; once no worker reaches the queue (the old pod gone
as well: here the Deployment rolls by Recreate) the order stays pending and the probe fails."""

from __future__ import annotations

import json

import pytest

from sregym.apps import app_driver
from sregym.core.loader import load_catalog
from sregym.core.problem import AppRef
from sregym.oracles import MITIGATION_ORACLES, MitigationContext

pytestmark = [pytest.mark.cluster, pytest.mark.long]

NAMESPACE = "online-shop"
PROBLEM = "shop_concurrent_pool_leak_and_worker_queue"


def graded(kube, name: str, **overrides):
    params = next(o.params for o in load_catalog().problems[PROBLEM].problem.oracles.mitigation if o.name == name)
    cls = MITIGATION_ORACLES.get(name)
    ctx = MitigationContext(kube=kube, namespace=NAMESPACE, window_seconds=4)
    return cls(cls.parse_params({**params, **overrides}), ctx).check()


def worker_with(kube, url: str | None, strategy: str = "RollingUpdate") -> None:
    patch = {"spec": {"strategy": {"type": strategy, "rollingUpdate": None}}}
    kube.kubectl("patch", "deployment", "worker", "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))
    kube.kubectl("set", "env", "deployment/worker", "-n", NAMESPACE, f"NATS_URL={url}" if url else "NATS_URL-")


def test_orders_are_fulfilled_only_while_a_worker_reaches_the_queue(cluster):
    kube = cluster.kube
    app_driver().deploy(AppRef(name="online-shop", namespace=NAMESPACE), cluster)  # reused when undrifted
    try:
        assert graded(kube, "http_probe", requests=2).passed
        for wrong in ("nats://shop-queue:4223", "nats://shop-queue:4999"):  # the fault's, and another
            worker_with(kube, wrong)
            kube.kubectl("rollout", "status", "deployment/worker", "-n", NAMESPACE, "--timeout=25s", check=False)
            health = graded(kube, "workload_health", window_seconds=2)
            assert not health.passed, health.message
        # no worker reaches the queue: the old pod goes too
        worker_with(kube, "nats://shop-queue:4999", "Recreate")
        kube.kubectl("rollout", "status", "deployment/worker", "-n", NAMESPACE, "--timeout=25s", check=False)
        probe = graded(kube, "http_probe", requests=2, min_pass_fraction=0.5)
        assert not probe.passed and "pending" in probe.message, probe.message
    finally:
        worker_with(kube, None)  # the chart sets NATS_URL in shop-settings, not on the worker
        kube.kubectl("rollout", "status", "deployment/worker", "-n", NAMESPACE, "--timeout=120s", check=False)
    assert graded(kube, "http_probe", requests=2).passed
    assert graded(kube, "workload_health", window_seconds=2).passed
