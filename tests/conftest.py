"""Shared fixtures. ``cluster`` brings the real local cluster up once per test session (or
reuses a running one); every integration test takes it. Set SREGYM_TEST_KUBECONFIG (and
optionally SREGYM_TEST_CONTEXT) to run the integration tests against an existing cluster."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from sregym.cluster.handle import ClusterHandle


@pytest.fixture(scope="session")
def cluster() -> ClusterHandle:
    if os.environ.get("SREGYM_TEST_KUBECONFIG"):
        from sregym.cluster.providers import ExistingCluster

        return ExistingCluster(Path(os.environ["SREGYM_TEST_KUBECONFIG"]), os.environ.get("SREGYM_TEST_CONTEXT")).up()
    if os.geteuid() != 0:
        pytest.skip("the local cluster needs root (set SREGYM_TEST_KUBECONFIG to use an existing cluster)")
    from sregym.cluster.local.provider import LocalCluster
    from sregym.cluster.providers import remember

    local = LocalCluster(os.environ.get("SREGYM_TEST_CLUSTER", "default"))
    local.paths.root.parent.mkdir(parents=True, exist_ok=True)
    # Several pytest processes (or a developer's shell) may ask at once: one brings it up.
    with open(local.paths.root.parent / f".{local.name}.up.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        handle = local.handle() if local.is_up() else local.up()
    remember(handle)
    return handle


def pytest_collection_modifyitems(config, items):
    """Lifecycle tests stop and restart the shared cluster: run them before everything else."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("lifecycle") else 1)
