"""An app is healthy only once every rollout asked for is done: a Deployment whose old pods still
serve while the new ones start (a fix that rolls the pods, a restart) reads as ready replica for
replica, and an oracle graded then sees the old pods (measured: ``shop_db_pool_leak``'s recovery
graded its ConfigMap oracle against pods still running the bad value)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sregym.apps.lifecycle import rollout_complete


def deployment(generation=2, observed=2, replicas=1, updated=1, available=1):
    return SimpleNamespace(metadata=SimpleNamespace(generation=generation),
                           status=SimpleNamespace(observed_generation=observed, replicas=replicas,
                                                  updated_replicas=updated, available_replicas=available))


def test_a_finished_rollout_is_complete():
    assert rollout_complete(deployment(), 1)
    assert rollout_complete(deployment(replicas=0, updated=0, available=0), 0)  # scaled to zero


@pytest.mark.parametrize("state", [
    {"observed": 1},                              # the controller has not seen the new spec yet
    {"replicas": 2, "updated": 1, "available": 1},  # the new pod is up, the old one not gone
    {"replicas": 2, "updated": 1, "available": 2},  # old pod ready, new one starting (surge)
    {"updated": 0},                               # nothing updated yet
])
def test_a_rollout_in_progress_is_not_complete(state):
    assert not rollout_complete(deployment(**state), 1)
