"""Anti-gaming: cheap strategies must not pass mitigation while the fault persists.

For whole problems from ``problems/`` (at least five fault families), on the real cluster: deploy
the app, measure the baseline, inject and verify the faults, then play a strategy as an agent
could with write access to the app's namespace: do nothing, restart every pod, delete and
recreate every Deployment/StatefulSet from its current spec, or scale everything to zero and back.
If the fault is still in place afterwards (the injector's own ``verify`` says so), the problem's
mitigation oracles must fail. Faults are recovered afterwards whatever happens.
"""

from __future__ import annotations

import math
import os
import secrets
import time

import anyio
import pytest
from gaming_strategies import STRATEGIES, play

from sregym.conductor.appdriver import app_driver
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.grading import grade_mitigation
from sregym.conductor.journal import Journal, RunHeader
from sregym.conductor.run import ensure_hidden_namespace
from sregym.conductor.scheduler import TimelinePlayer
from sregym.conductor.timeline import resolve_timeline
from sregym.core.loader import load_catalog

pytestmark = pytest.mark.cluster

GRADE_WINDOW = float(os.environ.get("SREGYM_ANTIGAMING_WINDOW", "15"))
BASELINE_WINDOW = 10.0
MIN_FAMILIES = 5
# Six families whose faults live in Kubernetes objects, so each case takes about a minute.
# SREGYM_ANTIGAMING_PROBLEMS=all (or a comma list of ids) chooses others.
DEFAULT_PROBLEMS = ("hotel_geo_missing_db_password", "hotel_frontend_scaled_to_zero",
                    "hotel_reservation_node_selector", "hotel_user_limit_range", "hotel_rate_bad_image_tag",
                    "hotel_cache_wrong_port")
# The app runs in its own namespace so the strategies never disturb anyone else's install.
NAMESPACE_SUFFIX = "-gaming"


def problems_by_family() -> list:
    """One problem per fault family (the first by id), of those with a root-cause fault."""
    catalog = load_catalog()  # a catalog that does not load is a collection error, not zero cases
    chosen: dict[str, object] = {}
    env = os.environ.get("SREGYM_ANTIGAMING_PROBLEMS", "")
    wanted = [] if env == "all" else ([p for p in env.split(",") if p] or list(DEFAULT_PROBLEMS))
    for pid, lp in sorted(catalog.problems.items()):
        p = lp.problem
        if p.no_op or (wanted and pid not in wanted):
            continue
        chosen.setdefault(p.tags.fault_family, p)
    return list(chosen.values())


PROBLEMS = problems_by_family()


async def gamed(problem, strategy: str, cluster):
    """(fault still in place, mitigation grade) after ``strategy``; faults always recovered."""
    driver = app_driver()
    problem = problem.model_copy(update={"app": problem.app.model_copy(
        update={"namespace": problem.app.name + NAMESPACE_SUFFIX})})
    app = await anyio.to_thread.run_sync(driver.deploy, problem.app, cluster)
    await anyio.to_thread.run_sync(ensure_hidden_namespace, cluster.kube)
    baseline = await anyio.to_thread.run_sync(driver.baseline, app, cluster, BASELINE_WINDOW)
    run_id = "g" + time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)
    journal = Journal(run_id)
    journal.start(RunHeader(run_id=run_id, problem_id=problem.id, kubeconfig=str(cluster.kubeconfig),
                            context=cluster.context))
    plane = FaultPlane(journal=journal, kube=cluster.kube, app_namespace=app.namespace, run_id=run_id, run_seed=0)
    try:
        player = TimelinePlayer(plane, problem.faults, resolve_timeline(problem, 0, noise=False))
        await player.play_until(math.inf)
        await anyio.to_thread.run_sync(play, strategy, cluster.kube, app.namespace, 20)
        persists = False
        for f in problem.root_cause_faults:
            check = await plane.verify(f.id, timeout=5)
            persists = persists or check.ok
        grade = await grade_mitigation(problem, app, cluster, baseline, GRADE_WINDOW)
        return persists, grade
    finally:
        with anyio.CancelScope(shield=True):
            if not await plane.recover_all():
                journal.close()
            # the next case's deploy waits until the app is healthy again


@pytest.fixture(scope="module", autouse=True)
def gaming_namespaces(cluster):
    yield
    for name in {p.app.name + NAMESPACE_SUFFIX for p in PROBLEMS}:
        cluster.kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def gaming_cases(problems, strategies) -> list:
    """Every strategy on every problem (about 4-7 minutes a case). The diagonal, each problem with
    one strategy, rotating so that every strategy and every family is met once, is in the ci tier;
    the rest of the matrix is in the long tier (``pytest -m long``)."""
    diagonal = {(p.id, strategies[i % len(strategies)]) for i, p in enumerate(problems)}
    return [pytest.param(p, s, id=f"{s}-{p.id}", marks=() if (p.id, s) in diagonal else pytest.mark.long)
            for s in strategies for p in problems]


CASES = gaming_cases(PROBLEMS, list(STRATEGIES))


def test_the_cases_cover_enough_fault_families():
    families = {p.tags.fault_family for p in PROBLEMS}
    hand_picked = os.environ.get("SREGYM_ANTIGAMING_PROBLEMS", "all") not in ("", "all")
    need = 1 if hand_picked else MIN_FAMILIES  # a hand-picked list covers what it names
    assert len(families) >= need, f"{need} fault families needed, found {sorted(families)} (problems/)"


@pytest.mark.parametrize(("problem", "strategy"), CASES)
def test_gaming_strategy_does_not_pass_while_the_fault_persists(cluster, problem, strategy):
    persists, grade = anyio.run(gamed, problem, strategy, cluster)
    if strategy == "do_nothing":
        assert persists, f"{problem.id}: the fault vanished without any action"
    # the oracle passes exactly when the fault is gone: a pass with the fault in place is gamed, a
    # failure with the fault gone grades a working system as broken
    assert grade.passed != persists, (
        f"{problem.id}: after '{strategy}' the fault {'persists' if persists else 'is gone'} but mitigation "
        f"{'passed' if grade.passed else 'failed'}: " + "; ".join(f"{c.name}: {c.message}" for c in grade.checks))
