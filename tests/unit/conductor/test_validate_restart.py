"""validate's "restart every pod" step: every pod deleted, then a wait for the replacements of the
pods that were running (readiness is not awaited: a faulty pod may never be Ready)."""

from __future__ import annotations

import json
from types import SimpleNamespace

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

    def kubectl(self, *args: str, **kw):
        self.calls.append(args)
        if args[:2] == ("get", "pods"):
            items = self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]
            return SimpleNamespace(stdout=json.dumps({"items": items}), returncode=0)
        return SimpleNamespace(stdout="", returncode=0)


def test_waits_for_a_running_replacement_of_each_running_pod(monkeypatch):
    monkeypatch.setattr(validate.time, "sleep", lambda s: None)
    before = [pod("a", "Running"), pod("b", "Running"), pod("stuck", "Pending"), pod("bare", "Running", owned=False)]
    kube = FakeKube([before, before, [], [pod("c", "Pending")], [pod("c", "Running"), pod("d", "Pending")],
                     [pod("c", "Running"), pod("d", "Running"), pod("e", "Pending")]])
    detail = restart_every_pod(kube, "shop")
    assert ("delete", "pods", "--all", "-n", "shop", "--wait=true") in kube.calls
    assert detail == "2 running pods deleted, 2 replacements running"


def test_stops_waiting_once_nothing_more_starts(monkeypatch):
    clock = iter(range(0, 10_000, 5))
    monkeypatch.setattr(validate.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(validate.time, "sleep", lambda s: None)
    before = [pod("a", "Running"), pod("b", "Running")]
    kube = FakeKube([before, before, [pod("c", "Running"), pod("d", "Pending")]])  # d never runs (a quota, a taint)
    assert restart_every_pod(kube, "shop", still=30) == "2 running pods deleted, 1 replacements running"
