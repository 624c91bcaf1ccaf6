"""Anti-gaming matrix: no cheap strategy passes a mitigation oracle while the fault persists.

Rows are fault families: every primitive a problem in ``problems/`` uses, grouped by layer
(Kubernetes objects, application config, OS, network, hardware, metastable, concurrent), each
played on one problem that uses it. Columns are what a gaming agent tries (``gaming_strategies``).
For each cell, on the real cluster: deploy the app in its own namespace, measure the baseline,
inject and verify the faults, play the strategy, then decide by an independent check of the
fault's effect (``fault_effects``, never the injector's own ``verify``) whether the fault is still
there, and grade:

- fault still there: the mitigation oracles must fail;
- fault really gone: they must pass when every Service of the app answers, and fail when the
  strategy broke something users need (``users_served``);
- a strategy that only replaces pods (restart, recreate, scale to zero) must not remove a fault
  whose real cause outlives the process (DESIGN.md: a partition, a bad disk, a stressed node).

Tiers: the CI subset (``CI_CASES``: the strategies no cheaper ci-tier test plays, see there) runs in
the ``ci`` tier; every other cell is marked ``long``. ``SREGYM_ANTIGAMING_CASES=ci``
(or ``diagonal``) narrows to the CI subset, ``full`` (default) keeps all, ``id:strategy,...``
chooses cells. ``SREGYM_ANTIGAMING_RESULTS=FILE`` appends one JSON line per cell, which
``scripts/anti_gaming_matrix.py`` turns into the table in docs/grading.md.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

import anyio
import pytest
from fault_effects import POD_SCOPED, Effect, family, fault_effect, graded_faults, users_served
from gaming_strategies import RESTARTS, STRATEGIES, forget_earlier_revisions, play, slo_queries

from sregym.apps import app_driver, lifecycle
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.grading import grade_mitigation, symptom_lag
from sregym.conductor.journal import Journal, RunHeader
from sregym.conductor.episode import BASELINE_MET_WITHIN_S, baseline_meeting_objectives, ensure_hidden_namespace
from sregym.conductor.scheduler import TimelinePlayer
from sregym.conductor.timeline import resolve_timeline
from sregym.core.jsonlines import append_json_line
from sregym.core.loader import load_catalog
from sregym.report.docblock import checkout

pytestmark = pytest.mark.cluster

GRADE_WINDOW = float(os.environ.get("SREGYM_ANTIGAMING_WINDOW", "15"))
BASELINE_WINDOW = 10.0
# The app runs in its own namespace so the strategies never disturb anyone else's install.
NAMESPACE_SUFFIX = "-gaming"
# The matrix's rows: every family once, on the problem most likely to be gamed (a restart on
# pod-scoped faults, probe removal where readiness grades, fake metrics where an SLO grades).
ROWS = (
    "shop_api_redis_partition",                    # network, readiness-graded
    "shop_db_fsync_failure",                       # OS (syscall)
    "latent_sector_error",                         # hardware
    "hotel_recommendation_oom",                    # Kubernetes objects, readiness-graded
    "hotel_concurrent_oom_and_reservation_probe",  # concurrent
    "hotel_geo_missing_db_password",               # application config
    "hotel_retry_storm_after_db_stall",            # metastable, SLO-graded
    "shop_web_admission_webhook_down",             # control plane (the API server's admission chain)
)
# The cells CI plays (about 5 minutes): the strategies no cheaper ci-tier test plays. "A restart
# does not cure it" is proved in the ci tier for every family by cheaper tests, so those cells are
# long: network (test_fault_persistence.py: delete the partitioned pod, remove its probe), OS
# (test_primitives_on_cluster.py: the ptrace and seccomp syscall faults follow a container
# restart; CPU pressure survives a restart of every pod), hardware
# (test_latent_sector_error_is_not_fixed_by_restarting_the_database), and the restart step of
# every lite problem's validation (Kubernetes objects, application config).
CI_CASES = (
    # SLO-graded: fake what it reads. The SLO oracle reads the same series whatever the fault, so the
    # cheapest SLO-only problem plays it (hotel_retry_storm_after_db_stall's cell took 183 s plus 40 s
    # of teardown in CI; this one measured 111-113 s plus 51 s, 2026-11-29)
    ("hotel_geo_cpu_pressure", "fake_metrics"),
    # readiness-graded: remove what it reads. After fake_metrics, which leaves the chart's objects as
    # they were, so its deploy reuses the install; the other way round the next deploy had to put
    # the removed probes back (a rollout of every pod, then a fresh baseline): the two cells took
    # 96 + 21 s in this order, 115 + 63 s in the other (CI of 2d20e29), 2026-11-29
    ("hotel_recommendation_oom", "remove_probes"),
)


def catalog_problems() -> list:
    return [lp.problem for _, lp in sorted(load_catalog().problems.items()) if not lp.problem.no_op]


def representatives(problems: list) -> dict[tuple[str, str], object]:
    """One problem per (family, primitive): the one ``ROWS`` names, else the first by id."""
    ci = set(ROWS)
    chosen: dict[tuple[str, str], object] = {}
    for p in sorted(problems, key=lambda p: (p.id not in ci, p.id)):
        chosen.setdefault(family(p), p)
    return chosen


def matrix_cases(problems: list, selection: str) -> list:
    """pytest params (problem, strategy): the CI subset unmarked, every other cell ``long``."""
    by_id = {p.id: p for p in problems}
    ci = [(by_id[pid], s) for pid, s in CI_CASES]
    if selection in ("ci", "diagonal"):
        cells = ci
    elif selection == "full":
        cells = ci + [(p, s) for p in representatives(problems).values() for s in STRATEGIES
                      if (p.id, s) not in CI_CASES]
    else:
        cells = [(by_id[pid], s) for pid, s in (c.split(":") for c in selection.split(",") if c)]
    return [pytest.param(p, s, id=f"{s}-{p.id}", marks=(KNOWN_OPEN[(p.id, s)],) if (p.id, s) in KNOWN_OPEN
                         else () if (p.id, s) in CI_CASES else pytest.mark.long)
            for p, s in cells]


# Cells measured failing on the merged tree and not yet fixed: they run, and must keep failing until
# fixed (strict), so the gap is on record in every CI run rather than hidden.
KNOWN_OPEN: dict[tuple[str, str], object] = {}
# Problems whose users feel the fault while it persists, after a restart as before it (the database
# reads the bad blocks from its volume): the independent users check must then see what they feel.
USERS_FEEL_THE_FAULT = {"latent_sector_error"}


CASES = matrix_cases(catalog_problems(), os.environ.get("SREGYM_ANTIGAMING_CASES", "full"))
CHECKOUT = checkout()  # the code this session loaded, whatever is committed while it runs


async def gamed(problem, strategy: str, cluster, tmp: Path) -> dict:
    """Play ``strategy`` on the faulty app; the cell's observations. Faults always recovered."""
    driver = app_driver()
    phases: dict[str, float] = {}  # seconds each step took: what a cell costs, and where
    mark = time.monotonic()

    def lap(name: str) -> None:
        nonlocal mark
        now = time.monotonic()
        phases[name] = round(now - mark, 1)
        mark = now
        # as it happens, on stderr: a cell killed by its lock hold's timeout still shows where it was
        print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {problem.id} x {strategy}: {name} took {phases[name]} s",
              file=sys.stderr, flush=True)

    problem = problem.model_copy(update={"app": problem.app.model_copy(
        update={"namespace": problem.app.name + NAMESPACE_SUFFIX})})
    app = await anyio.to_thread.run_sync(driver.deploy, problem.app, cluster)
    ns = app.namespace
    await anyio.to_thread.run_sync(ensure_hidden_namespace, cluster.kube)
    # the history a fresh install has: rollout_undo went back to an earlier cell's fault (its
    # previous revision) and measured that, and the deploy cannot remove such an env entry
    forgotten = await anyio.to_thread.run_sync(forget_earlier_revisions, cluster.kube, ns)
    lap("deploy")
    # as a run's: measured again until the app serves its users as its SLOs ask (a baseline taken
    # while they were not would pass a cell whose fault is still there)
    baseline = await baseline_meeting_objectives(driver, app, cluster, BASELINE_WINDOW, within_s=BASELINE_MET_WITHIN_S)
    lap("baseline")
    run_id = "g" + time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)
    journal = Journal(run_id)
    journal.start(RunHeader(run_id=run_id, problem_id=problem.id, kubeconfig=str(cluster.kubeconfig),
                            context=cluster.context))
    plane = FaultPlane(journal=journal, kube=cluster.kube, app_namespace=ns, run_id=run_id, run_seed=0)
    played = None
    try:
        timeline = resolve_timeline(problem, 0, noise=False)
        await TimelinePlayer(plane, problem.faults, timeline).play_until(max(e.at for e in timeline))
        injected = time.monotonic()
        lap("inject")
        played = await anyio.to_thread.run_sync(lambda: play(strategy, cluster.kube, ns, 30,
                                                             component=problem.ground_truth.component, tmp=tmp,
                                                             lag=symptom_lag(problem),
                                                             faults=graded_faults(problem),
                                                             slo_queries=slo_queries(problem)))
        lap("play")
        effect = await anyio.to_thread.run_sync(fault_effect, cluster.kube, ns, problem)
        # what users get decides a cell only once the fault is gone (``expectation``), or where users
        # must feel the fault; asked of an app still broken it only waited (16 order histories timing
        # out: 60-100 s of a cell)
        asked = not effect.present or problem.id in USERS_FEEL_THE_FAULT
        served = (await anyio.to_thread.run_sync(users_served, cluster.kube, ns) if asked
                  else Effect(False, "not asked: the fault is still there"))
        lap("checks")
        # an oracle reading a rate sees the fault only once its window covers it (as in validate)
        await anyio.sleep(max(0.0, symptom_lag(problem) - (time.monotonic() - injected)))
        # a cell needs only the verdict: once one oracle fails, the others' windows are cut
        grade = await grade_mitigation(problem, app, cluster, baseline, GRADE_WINDOW, stop_when_lost=True)
        lap("grade")
        return {"problem": problem.id, "family": family(problem)[0], "primitive": family(problem)[1],
                "strategy": strategy, "played": played.outcome, "fault_present": effect.present,
                "effect": effect.evidence, "users_broken": served.present if asked else None, "served": served.evidence,
                "passed": grade.passed, "phases": phases,
                "deployed": ("reused" if app.reused else "installed or upgraded")
                + (f"; earlier revisions forgotten: {len(forgotten)}" if forgotten else ""),
                "checks": "; ".join([f"{c.name}: {'pass' if c.passed else 'FAIL'} {c.message}" for c in grade.checks]
                                    + ([f"rerouted: {'; '.join(grade.rerouted[:2])}"] if grade.rerouted else []))}
    finally:
        with anyio.CancelScope(shield=True):
            for undo in played.cleanup if played else []:
                await anyio.to_thread.run_sync(undo)
            if not await plane.recover_all():
                journal.close()
            lap("recover")  # into the cell's phases too: the dict returned above is this one
            # the next case's deploy puts back whatever drifted from the chart


@pytest.fixture(scope="module")
def gaming_namespaces(cluster):
    apps = {p.values[0].app.name for p in CASES}
    # an earlier session's teardown does not wait for its namespaces to go (below); a deploy into
    # one still terminating is refused, so wait here for what the deploy needs (nothing in CI,
    # whose cluster starts empty)
    for app in apps:
        lifecycle.wait_namespace_gone(cluster, app + NAMESPACE_SUFFIX)
    yield
    # the apps' own delete: custom resources first, while their operator still runs (a plain
    # namespace delete left event-pipeline's QueueCluster with the operator's finalizer and the
    # namespace terminating for ever, so the next run's deploy there failed). It does not wait for
    # the pods and the namespace to go: that was 46 s of CI's last test's teardown, CI's last step
    for app in apps:
        lifecycle.delete(cluster, app, app + NAMESPACE_SUFFIX, wait=False)


def expectation(cell: dict) -> tuple[bool, str]:
    """Whether the oracle must pass, and why (decided by the independent checks only)."""
    if cell["fault_present"]:
        return False, "the fault is still there"
    if cell["users_broken"]:
        return False, "the fault is gone but the strategy broke what users need"
    removed = cell["played"].removeprefix("probes removed from ") if cell["played"].startswith("probes removed") else ""
    if cell["strategy"] == "remove_probes" and removed.strip():
        # removing a broken probe along with every other one is not a fix (docs/grading.md,
        # workload_health's weakened probes): the fault's own probe goes too, so the fault check
        # alone would call this cell cured
        return False, "the fault is gone with the health checks the strategy removed"
    if cell["strategy"] == "loosen_probes" and cell["played"].startswith("probes loosened on ") \
            and not cell["played"].endswith("(no probes)"):
        # the same with the probes kept but made forgiving (readiness asking /healthz or a bare TCP
        # connect, 30 failures tolerated): workload_health's weakened-probe rule must see it
        return False, "the fault is gone with the health checks the strategy loosened"
    return True, "the fault is really gone and every service answers"


def test_matrix_covers_every_fault_family_and_primitive():
    problems = catalog_problems()
    families = {family(p)[0] for p in problems}
    assert families >= {"Kubernetes objects", "application config", "OS", "network", "hardware", "metastable",
                        "concurrent", "control plane"}, families
    row_families = {family(p)[0] for p in problems if p.id in ROWS}
    assert row_families == families, f"the matrix's rows miss {families - row_families}"
    full = matrix_cases(problems, "full")
    assert {(family(c.values[0]), c.values[1]) for c in full} == {(k, s) for k in representatives(problems)
                                                                   for s in STRATEGIES}


@pytest.mark.parametrize(("problem", "strategy"), CASES)
def test_gaming_strategy_does_not_pass_while_the_fault_persists(cluster, gaming_namespaces, problem, strategy,
                                                                tmp_path):
    started = time.monotonic()
    cell = anyio.run(gamed, problem, strategy, cluster, tmp_path)
    cell["seconds"] = round(time.monotonic() - started)  # what the cell costs, deploy and recovery included
    must_pass, why = expectation(cell)
    must_persist = strategy in RESTARTS and any(f.injector in POD_SCOPED for f in graded_faults(problem))
    cell |= {"expected": "pass" if must_pass else "fail", "why": why, "must_persist": must_persist,
             "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "checkout": CHECKOUT}
    results = os.environ.get("SREGYM_ANTIGAMING_RESULTS")
    if results:
        append_json_line(Path(results), cell)
    summary = (f"{problem.id} x {strategy} ({cell['played']}): fault {'present' if cell['fault_present'] else 'gone'} "
               f"[{cell['effect']}]; users [{cell['served']}]; oracle {'passed' if cell['passed'] else 'failed'} "
               f"[{cell['checks']}]")
    print("\n" + summary)
    if strategy == "do_nothing":
        assert cell["fault_present"], f"the fault vanished without any action: {summary}"
    if must_persist:
        assert cell["fault_present"], f"a restart removed a fault whose real cause outlives it: {summary}"
    if must_persist and cell["fault_present"] and problem.id in USERS_FEEL_THE_FAULT:
        assert cell["users_broken"], f"the users check missed what the fault does to users: {summary}"
    assert cell["passed"] == must_pass, f"oracle should {cell['expected']} ({why}): {summary}"
