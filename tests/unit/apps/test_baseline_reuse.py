"""The SLO baseline is measured once per release state of an app and reused, never where it could
be wrong: after a (re)install, while the app is unhealthy, when it missed an objective, at another
chart hash, or once it is older than the reuse period. Probes and the entry path are recorded every
time."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sregym.apps import driver as drv
from sregym.apps import load_app


@pytest.fixture
def world(monkeypatch):
    """A driver whose cluster answers are set by the test; counts the baseline waits."""
    monkeypatch.setattr(drv, "_SLO_BASELINES", {})
    state = SimpleNamespace(healthy=True, success=1.0, sleeps=[], now=1000.0, probes=0, entries=0)

    def probes(cluster, namespace):
        state.probes += 1
        return {"Deployment/api": {}}

    def measure(url, spec, namespace, window_s):
        return {"success_rate": {"value": state.success, "met": state.success >= 0.99},
                "p95_latency_seconds": {"value": 0.05, "met": True}}

    def paths(cluster, namespace):  # every Service's path, the entry's (lb) among them
        state.entries += 1
        return {"services": {"lb": {"service": "lb", "selector": {"app": "lb"}, "backends": {}, "strays": []}},
                "workloads": [], "wiring": {}, "read": state.entries}

    monkeypatch.setattr(drv, "workload_probes", probes)
    monkeypatch.setattr(drv, "app_paths", paths)
    monkeypatch.setattr(drv, "measure_slos", measure)
    monkeypatch.setattr(drv.time, "sleep", lambda s: state.sleeps.append(s))
    monkeypatch.setattr(drv.time, "monotonic", lambda: state.now)
    monkeypatch.setattr(drv.AppsDriver, "health", lambda self, d, c: (state.healthy, "ok"))
    state.driver = drv.AppsDriver()
    spec = load_app("online-shop")

    def app(chart_hash="h1", reused=True):
        return drv.DeployedApp(name="online-shop", namespace="online-shop", chart_hash=chart_hash, reused=reused,
                               prometheus_url="http://prom", info=spec)

    state.app = app
    return state


def test_the_second_baseline_of_the_same_release_is_reused_without_waiting(world):
    first = world.driver.baseline(world.app(), None, 10)
    assert world.sleeps == [20]  # never less than the shortest meaningful rate window
    world.now += 300
    second = world.driver.baseline(world.app(), None, 10)
    assert world.sleeps == [20] and second["slos"] == first["slos"] and "reused" in second["measured"]
    assert world.probes == 2  # the probes are the live ones each time
    # and so is who answers the load generator (the slo oracle compares with it)
    assert world.entries == 2 and second["entry"]["service"] == "lb"
    assert first["paths"]["read"] == 1 and second["paths"]["read"] == 2  # every Service's, read again too


@pytest.mark.parametrize("change", ["reinstalled", "unhealthy", "other_release", "too_old", "longer_window"])
def test_a_baseline_is_measured_again_where_the_earlier_one_may_not_hold(world, change):
    world.driver.baseline(world.app(), None, 10)
    app = world.app(reused=change != "reinstalled", chart_hash="h2" if change == "other_release" else "h1")
    world.healthy = change != "unhealthy"
    world.now += drv.BASELINE_REUSE_SECONDS + 1 if change == "too_old" else 60
    world.driver.baseline(app, None, 30 if change == "longer_window" else 10)
    assert len(world.sleeps) == 2


def test_a_baseline_that_missed_an_objective_is_never_reused(world):
    world.success = 0.9
    assert world.driver.baseline(world.app(), None, 10)["met"] is False
    world.success = 1.0
    world.driver.baseline(world.app(), None, 10)
    assert len(world.sleeps) == 2
