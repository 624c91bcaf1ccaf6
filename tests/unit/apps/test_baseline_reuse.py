"""The SLO baseline is measured once per release state of an app and reused, never where it could
be wrong: after a (re)install, while the app is unhealthy, when it missed an objective, at another
chart hash, in a namespace made again, or once it is older than the reuse period. Probes and the
entry path are recorded every time. It is kept on the conductor's host, so the next process (each
`sregym run` and `sregym validate` is one) reuses it too; a kept file that does not read as a
baseline is never trusted."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sregym.apps import driver as drv
from sregym.apps import load_app


@pytest.fixture
def world(monkeypatch, tmp_path):
    """A driver whose cluster answers are set by the test; counts the baseline waits."""
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path / "state"))
    state = SimpleNamespace(healthy=True, success=1.0, sleeps=[], now=1_800_000_000.0, probes=0, entries=0,
                            uid="uid-1", state=tmp_path / "state")

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
    monkeypatch.setattr(drv.time, "time", lambda: state.now)
    monkeypatch.setattr(drv, "namespace_uid", lambda cluster, namespace: state.uid)
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


def test_the_next_process_reuses_the_baseline_the_last_one_measured(world):
    world.driver.baseline(world.app(), None, 10)
    world.now += 60
    fresh = drv.AppsDriver()  # what a new `sregym run` makes: nothing shared in memory
    assert "reused" in fresh.baseline(world.app(), None, 10)["measured"] and world.sleeps == [20]
    [kept] = (world.state / "baselines").iterdir()
    assert kept.name == "uid-1.json" and oct(kept.parent.stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("change", ["reinstalled", "unhealthy", "other_release", "too_old", "longer_window",
                                    "namespace_made_again", "clock_went_back"])
def test_a_baseline_is_measured_again_where_the_earlier_one_may_not_hold(world, change):
    world.driver.baseline(world.app(), None, 10)
    world.uid = "uid-2" if change == "namespace_made_again" else world.uid
    app = world.app(reused=change != "reinstalled", chart_hash="h2" if change == "other_release" else "h1")
    world.healthy = change != "unhealthy"
    world.now += {"too_old": drv.BASELINE_REUSE_SECONDS + 1, "clock_went_back": -60}.get(change, 60)
    world.driver.baseline(app, None, 30 if change == "longer_window" else 10)
    assert len(world.sleeps) == 2


def test_a_baseline_that_missed_an_objective_is_never_reused(world):
    world.success = 0.9
    assert world.driver.baseline(world.app(), None, 10)["met"] is False
    world.success = 1.0
    world.driver.baseline(world.app(), None, 10)
    assert len(world.sleeps) == 2


@pytest.mark.parametrize("tamper", ["cut_short", "not_json", "an_objective_missed", "no_slos", "a_list",
                                    "no_entries", "time_as_text"])
def test_a_kept_baseline_that_does_not_read_as_one_is_measured_again(world, tamper):
    """A file a kill cut short or someone edited (an objective marked missed, the measurements
    gone) is never the baseline an oracle compares with: the window is waited out again."""
    world.driver.baseline(world.app(), None, 10)
    [kept] = (world.state / "baselines").iterdir()
    text = kept.read_text()
    doc = json.loads(text)
    [entry] = doc["baselines"]
    if tamper == "an_objective_missed":
        entry["slos"]["success_rate"]["met"] = False
    elif tamper == "no_slos":
        del entry["slos"]
    elif tamper == "no_entries":
        doc = {"baseline": entry}
    elif tamper == "time_as_text":
        entry["measured_at"] = "yesterday"
    kept.write_text({"cut_short": text[: len(text) // 2], "not_json": "{{", "a_list": "[1, 2]"}.get(tamper)
                    or json.dumps(doc))
    world.now += 60
    again = world.driver.baseline(world.app(), None, 10)
    assert len(world.sleeps) == 2 and "reused" not in again.get("measured", "")


def test_a_shorter_baseline_does_not_push_out_a_longer_one_and_a_reinstall_forgets_both(world):
    """A run's baseline is 30 s, a validation's 20 s: measured in turn on one namespace, each is kept
    for its own kind, and the 30 s one also serves a 20 s request. A reinstall (in any process)
    forgets what was measured before it, even when its own measurement missed an objective."""
    world.driver.baseline(world.app(), None, 30)
    world.now += 60
    world.driver.baseline(world.app(), None, 10)  # 20 s asked: the 30 s one serves it
    assert world.sleeps == [30]
    world.now += 60
    world.driver.baseline(world.app(reused=False), None, 10)  # a reinstall measures its own 20 s one
    assert world.sleeps == [30, 20]
    world.now += 60
    world.driver.baseline(world.app(), None, 30)  # the 30 s one measured the release before the reinstall
    assert world.sleeps == [30, 20, 30]
    world.now += 60
    assert "reused" in world.driver.baseline(world.app(), None, 10)["measured"]  # both kept since the reinstall
    assert world.sleeps == [30, 20, 30]
    world.driver.baseline(world.app(chart_hash="h2", reused=False), None, 10)  # another release: the old ones go
    [kept] = (world.state / "baselines").iterdir()
    assert [e["chart_hash"] for e in json.loads(kept.read_text())["baselines"]] == ["h2"]


def test_without_a_namespace_uid_or_a_writable_folder_the_baseline_is_only_measured(world, monkeypatch):
    world.uid = None
    world.driver.baseline(world.app(), None, 10)
    world.driver.baseline(world.app(), None, 10)
    assert len(world.sleeps) == 2 and not (world.state / "baselines").exists()
    world.uid = "uid-1"
    world.state.mkdir(parents=True)
    (world.state / "baselines").write_text("a file where the folder goes")
    world.driver.baseline(world.app(), None, 10)  # no error: the next one measures again
    assert len(world.sleeps) == 3


def test_files_of_namespaces_long_gone_are_removed_when_a_baseline_is_kept(world):
    import os

    folder = world.state / "baselines"
    folder.mkdir(parents=True)
    old, recent = folder / "uid-gone.json", folder / "uid-other.json"
    for f in (old, recent):
        f.write_text('{"baselines": []}')
    now = world.now
    os.utime(old, (now - drv.BASELINE_REUSE_SECONDS - 5,) * 2)
    os.utime(recent, (now - 60,) * 2)
    world.driver.baseline(world.app(), None, 10)
    assert sorted(p.name for p in folder.iterdir()) == ["uid-1.json", "uid-other.json"]
