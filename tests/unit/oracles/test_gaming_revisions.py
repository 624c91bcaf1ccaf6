"""The anti-gaming matrix plays its cells one after another on one install of an app, so the
workloads' revision history holds every earlier cell's faulty template. ``rollout_undo`` goes back
one revision on every workload: measured on 2026-11-27, after the shop's concurrent cell (worker's
``NATS_URL`` overridden to port 4223, then recovered) it put that override back on ``worker`` in a
later cell, which then measured an earlier cell's fault, and the next deploy waited its 600 s for
``worker`` (helm's three-way merge does not remove an env entry the chart never had). Each cell
must start with the history a fresh install has: only the current revision of each workload."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "integration" / "oracles"))

from gaming_strategies import earlier_revisions  # noqa: E402


def deployment(name: str, uid: str, revision: int) -> dict:
    return {"kind": "Deployment", "metadata": {"name": name, "uid": uid,
                                               "annotations": {"deployment.kubernetes.io/revision": str(revision)}}}


def replicaset(name: str, owner_uid: str, revision: int, replicas: int, env: dict[str, str]) -> dict:
    return {"kind": "ReplicaSet",
            "metadata": {"name": name, "annotations": {"deployment.kubernetes.io/revision": str(revision)},
                         "ownerReferences": [{"kind": "Deployment", "uid": owner_uid, "controller": True}]},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "worker", "env": [{"name": k, "value": v} for k, v in env.items()]}]}}},
            "status": {"replicas": replicas}}


def statefulset(name: str, uid: str, current: str, update: str) -> dict:
    return {"kind": "StatefulSet", "metadata": {"name": name, "uid": uid},
            "status": {"currentRevision": current, "updateRevision": update}}


def controller_revision(name: str, owner_uid: str, revision: int) -> dict:
    return {"kind": "ControllerRevision", "revision": revision,
            "metadata": {"name": name, "ownerReferences": [{"kind": "StatefulSet", "uid": owner_uid,
                                                            "controller": True}]}}


WORKER = deployment("worker", "u-worker", 3)
# revision 1 (the chart's) came back as 3 when the earlier cell's fault was recovered
WORKER_FAULTY = replicaset("worker-6668ffcf96", "u-worker", 2, 0, {"NATS_URL": "nats://shop-queue:4223"})
WORKER_NOW = replicaset("worker-55466cdd4b", "u-worker", 3, 1, {})


def test_an_earlier_cells_faulty_revision_is_forgotten_and_the_current_one_kept():
    assert earlier_revisions([WORKER], [WORKER_FAULTY, WORKER_NOW], []) == ["replicaset/worker-6668ffcf96"]


def test_a_workload_fresh_from_its_install_has_nothing_to_forget():
    fresh = replicaset("api-7f9c", "u-api", 1, 1, {})
    assert earlier_revisions([deployment("api", "u-api", 1)], [fresh], []) == []


def test_a_replicaset_still_running_pods_is_left_to_its_rollout():
    # a rollout under way (its old pods still serve): deleting that ReplicaSet would kill them
    rolling = replicaset("worker-6668ffcf96", "u-worker", 2, 1, {})
    assert earlier_revisions([WORKER], [rolling, WORKER_NOW], []) == []


def test_replicasets_of_other_owners_are_not_touched():
    other = replicaset("web-1234", "u-web", 1, 0, {})
    assert earlier_revisions([WORKER], [WORKER_NOW, other], []) == []


def test_a_statefulsets_earlier_controller_revisions_are_forgotten():
    db = statefulset("shop-db", "u-db", "shop-db-abc", "shop-db-abc")
    revisions = [controller_revision("shop-db-old", "u-db", 1), controller_revision("shop-db-abc", "u-db", 2)]
    assert earlier_revisions([db], [], revisions) == ["controllerrevision/shop-db-old"]
