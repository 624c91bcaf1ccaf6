"""validate's "restart every pod" step: every pod deleted, then a wait for the replacements of the
pods that were running (readiness is not awaited: a faulty pod may never be Ready); a deleted pod
that never goes is named with what holds it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sregym.conductor import validate
from sregym.conductor.validate import restart_every_pod


def pod(uid: str, phase: str, owned: bool = True) -> dict:
    meta = {"uid": uid, "name": uid, **({"ownerReferences": [{"kind": "ReplicaSet"}]} if owned else {})}
    return {"metadata": meta, "status": {"phase": phase}}


class FakeKube:
    """Answers ``get pods`` from a script of listings; records other calls."""

    def __init__(self, listings: list[list[dict]]):
        self.listings = listings
        self.calls: list[tuple[str, ...]] = []
        self.events: list[dict] = []

    def kubectl(self, *args: str, **kw):
        self.calls.append(args)
        if args[:2] == ("get", "pods"):
            items = self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]
            return SimpleNamespace(stdout=json.dumps({"items": items}), returncode=0)
        if args[:2] == ("get", "events"):
            return SimpleNamespace(stdout=json.dumps({"items": self.events}), returncode=0)
        return SimpleNamespace(stdout="", returncode=0)


def test_waits_for_a_running_replacement_of_each_running_pod(monkeypatch):
    monkeypatch.setattr(validate.time, "sleep", lambda s: None)
    before = [pod("a", "Running"), pod("b", "Running"), pod("stuck", "Pending"), pod("bare", "Running", owned=False)]
    kube = FakeKube([before, before, [], [pod("c", "Pending")], [pod("c", "Running"), pod("d", "Pending")],
                     [pod("c", "Running"), pod("d", "Running"), pod("e", "Pending")]])
    detail = restart_every_pod(kube, "shop")
    assert ("delete", "pods", "--all", "-n", "shop", "--wait=false") in kube.calls
    assert detail == "2 running pods deleted (all gone in 0 s), 2 replacements running"


def test_stops_waiting_once_nothing_more_starts(monkeypatch):
    clock = iter(range(0, 10_000, 5))
    monkeypatch.setattr(validate.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(validate.time, "sleep", lambda s: None)
    before = [pod("a", "Running"), pod("b", "Running")]
    kube = FakeKube([before, before, [pod("c", "Running"), pod("d", "Pending")]])  # d never runs (a quota, a taint)
    assert restart_every_pod(kube, "shop", still=30) == "2 running pods deleted (all gone in 10 s), 1 replacements running"


def test_a_deleted_pod_that_never_goes_names_itself_and_what_holds_it(monkeypatch):
    """kubectl's own --wait said only "timed out after 180 seconds" (shop_web_readiness_probe seed 0,
    twice): the step must say which pod stayed, whether it was marked for deletion, its finalizers,
    its containers' state and its latest events."""
    clock = iter(range(0, 10_000, 5))
    monkeypatch.setattr(validate.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(validate.time, "sleep", lambda s: None)
    stuck = pod("web-1", "Running")
    stuck["metadata"].update(deletionTimestamp="2026-11-26T17:31:00Z", deletionGracePeriodSeconds=10,
                             finalizers=["example.com/hold"])
    stuck["spec"] = {"nodeName": "vm"}
    stuck["status"]["containerStatuses"] = [{"name": "web", "state": {"running": {"startedAt": "x"}}}]
    kube = FakeKube([[pod("web-1", "Running"), pod("api-1", "Running")], [stuck, pod("api-2", "Running")]])
    kube.events = [{"reason": "FailedKillPod", "message": "error killing pod: timeout", "lastTimestamp": "t"}]
    with pytest.raises(validate.PodsNotGone) as caught:
        restart_every_pod(kube, "shop", timeout=180)
    message = str(caught.value)
    assert "1 of 2 deleted pods still there after 180 s: web-1 on vm" in message
    assert "deleting since 2026-11-26T17:31:00Z (grace 10 s)" in message
    assert "finalizers example.com/hold" in message and "container web running" in message
    assert "event FailedKillPod: error killing pod: timeout" in message
    assert ("get", "events", "-n", "shop", "-o", "json", "--field-selector", "involvedObject.uid=web-1") in kube.calls


def test_a_pod_already_on_its_way_out_is_not_waited_for(monkeypatch):
    """A pod noise was replacing when the step began (a rolling restart's old pod, terminating) is
    not one whose replacement the step should wait for: its replacement is already among the new
    ones. Counted, it made the step wait out its whole still period (seen: 11 deleted, 10 back,
    44 s instead of 12 on hotel_geo_selector_mismatch)."""
    clock = iter(range(0, 10_000, 5))
    monkeypatch.setattr(validate.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(validate.time, "sleep", lambda s: None)
    leaving = pod("old", "Running")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-28T01:59:00Z"
    before = [pod("a", "Running"), pod("b", "Running"), leaving]
    kube = FakeKube([before, before, [pod("c", "Running"), pod("d", "Running")]])
    assert restart_every_pod(kube, "shop", still=30) == ("2 running pods deleted (all gone in 10 s), "
                                                         "2 replacements running")


def test_a_pod_a_fault_holds_terminating_is_not_waited_out(monkeypatch):
    """A pod deleted before the step and held by a finalizer (the fault of
    pipeline_db_pod_stuck_terminating) never goes while the fault stays: the step must not wait 180 s
    for it and fail as if the restart had hung (seen live: the step's timeout on that problem)."""
    clock = iter(range(0, 10_000, 5))
    monkeypatch.setattr(validate.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(validate.time, "sleep", lambda s: None)
    held = pod("db-0", "Running")
    held["metadata"].update(deletionTimestamp="2026-11-28T10:01:57Z", finalizers=["example.com/hold"])
    before = [pod("a", "Running"), held]
    kube = FakeKube([before, before, [held, pod("c", "Running")]])
    assert restart_every_pod(kube, "shop", still=30) == "1 running pods deleted (all gone in 10 s), 1 replacements running"
