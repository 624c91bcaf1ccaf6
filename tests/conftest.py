"""Shared fixtures. ``cluster`` brings the real local cluster up once per test session (or
reuses a running one); every integration test takes it. Set SREGYM_TEST_KUBECONFIG (and
optionally SREGYM_TEST_CONTEXT) to run the integration tests against an existing cluster."""

from __future__ import annotations

import fcntl
import os
import time
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


# Whole-problem suites: minutes per test. They run last so a time budget cuts them first.
SLOW = ("tests/integration/oracles/test_anti_gaming.py", "tests/integration/problems/",
        "tests/integration/report/test_suite_on_cluster.py", "tests/integration/report/test_nightly_on_cluster.py",
        "tests/integration/apps/test_app_misconfiguration.py")
_START = time.monotonic()


def _rank(item) -> int:
    if item.get_closest_marker("lifecycle"):
        return 0  # they stop and restart the shared cluster: before everything else
    if item.nodeid.startswith("tests/unit/"):
        return 1
    if item.nodeid.startswith(SLOW[0]):
        return 4  # the anti-gaming matrix is the most expensive: last
    if item.nodeid.startswith(SLOW):
        return 3
    return 2


def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: file order is kept inside each rank
    # Integration tests share one live cluster with each other's leftovers (pods restarting,
    # namespaces terminating): each gets one visible rerun ("R" in the output, listed in the
    # summary). Unit tests never do: a flaky unit test is a bug to fix.
    for item in items:
        if item.nodeid.startswith("tests/integration/") and not item.get_closest_marker("lifecycle"):
            item.add_marker(pytest.mark.flaky(reruns=1, reruns_delay=5))


def pytest_runtest_setup(item):
    """With SREGYM_TEST_BUDGET_SECONDS (CI sets it from its 90-minute limit), tests that would
    start after the budget is spent are skipped, with the reason shown by ``-rs`` (the README runs ``-rfEs``): a run that
    overruns CI's limit would report nothing at all."""
    budget = os.environ.get("SREGYM_TEST_BUDGET_SECONDS")
    if budget and time.monotonic() - _START > float(budget):
        pytest.skip(f"time budget of {float(budget):.0f}s for this run is spent "
                    "(SREGYM_TEST_BUDGET_SECONDS); run this test on its own or without the budget")


def pytest_runtest_logreport(report):
    """With SREGYM_TEST_TIMINGS=FILE, append each test's duration as it finishes (CI keeps the
    figures even when a run is cut short)."""
    path = os.environ.get("SREGYM_TEST_TIMINGS")
    if path and report.when == "call" or (path and report.outcome != "passed"):
        with open(path, "a") as f:
            f.write(f"{report.duration:8.1f}s {report.when:<8} {report.outcome:<7} {report.nodeid}\n")
