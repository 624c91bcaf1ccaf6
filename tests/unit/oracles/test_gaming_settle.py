"""After a strategy, the anti-gaming cell gives the rollouts it started time to settle before the
checks and the grade. It waited for every workload of the app, so a strategy that changed none
(a Service repointed, a process exec'd into a pod) still waited 30 s for the faulty workload the
fault keeps from ever getting ready (hotel_geo_container_port x repoint_service: 32 s of a 62 s
cell). A workload the strategy did not touch has nothing to settle from it; every one it touched,
and every one when it replaced pods, still gets the whole settle."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "integration" / "oracles"))

from gaming_strategies import Snapshot, to_settle  # noqa: E402

BEFORE = Snapshot(workloads={"deployment/geo": ("u-geo", 2), "deployment/frontend": ("u-fe", 1)},
                  pods={"p-geo-new", "p-geo-old", "p-fe"})


def test_a_strategy_that_touched_no_workload_waits_for_none():
    # repoint_service: a Service's selector changed, nothing else (geo stays unready by the fault)
    assert to_settle(BEFORE, BEFORE) == []


def test_a_workload_whose_spec_the_strategy_changed_is_waited_for():
    after = Snapshot(workloads={**BEFORE.workloads, "deployment/geo": ("u-geo", 3)}, pods=BEFORE.pods)
    assert to_settle(BEFORE, after) == ["deployment/geo"]


def test_a_workload_the_strategy_created_is_waited_for():
    after = Snapshot(workloads={**BEFORE.workloads, "deployment/frontend-edge": ("u-edge", 1)},
                     pods=BEFORE.pods | {"p-edge"})
    assert to_settle(BEFORE, after) == ["deployment/frontend-edge"]


def test_a_workload_recreated_under_the_same_name_is_waited_for():
    after = Snapshot(workloads={**BEFORE.workloads, "deployment/frontend": ("u-fe2", 1)}, pods=BEFORE.pods)
    assert to_settle(BEFORE, after) == ["deployment/frontend"]


def test_when_pods_were_deleted_every_workload_is_waited_for():
    # restart_every_pod: no spec changed, but every pod is a replacement that must come up
    after = Snapshot(workloads=BEFORE.workloads, pods={"p-geo-2", "p-fe-2"})
    assert to_settle(BEFORE, after) == ["deployment/frontend", "deployment/geo"]
