"""Validation may stop grading once the grade is lost: the mitigation verdict is the AND of its
oracles, so when one of them fails, the others' windows can change nothing. A run's grade never
stops early (its record keeps every oracle's own verdict). An oracle cut short is never reported
as passing on the samples it had."""

from __future__ import annotations

from types import SimpleNamespace

import anyio

from sregym.conductor.grading import grade_mitigation
from sregym.core.problem import Problem
from sregym.core.record import CheckResult
from sregym.oracles import MITIGATION_ORACLES, MitigationOracle, mitigation_oracle, sample_window, window_result
from sregym.oracles._api import NoParams

SLOW_WINDOW = 20.0

if "unit_fails_at_once" not in MITIGATION_ORACLES.names():
    @mitigation_oracle("unit_fails_at_once")
    class FailsAtOnce(MitigationOracle):
        """The fault is plainly there: one look decides it."""

        Params = NoParams

        def check(self) -> CheckResult:
            return CheckResult(name="unit_fails_at_once", passed=False, message="0/1 samples passed")

    @mitigation_oracle("unit_passes_slowly")
    class PassesSlowly(MitigationOracle):
        """Every sample passes, over a window of its own (``window_seconds`` of the context)."""

        Params = NoParams

        def check(self) -> CheckResult:
            samples = sample_window(lambda: (True, {}), self.ctx.window_seconds, 0.2, min_pass_fraction=1.0)
            return window_result("unit_passes_slowly", samples)


def problem(*oracles: str) -> Problem:
    return Problem.model_validate({
        "id": "unit_stops", "title": "t", "alert": "Checkout fails for every user.", "app": {"name": "a"},
        "faults": [{"id": "f", "injector": "unit_file_value", "target": {"name": "svc"},
                    "params": {"file": "/nonexistent", "value": "bad"}}],
        "ground_truth": {"root_cause": "a bad svc value", "component": "svc", "mechanism": "m"},
        "oracles": {"mitigation": [{"name": o} for o in oracles]},
        "difficulty": "easy", "tags": {"layer": "application", "fault_family": "f", "failure_mode": "error"}})


APP = SimpleNamespace(namespace="app", prometheus_url=None, info=None)
CLUSTER = SimpleNamespace(kube=None)


def grade(p: Problem, window: float, **kw):
    return anyio.run(lambda: grade_mitigation(p, APP, CLUSTER, {}, window, **kw))


def test_a_lost_grade_stops_the_other_oracles_windows_when_asked():
    g = grade(problem("unit_passes_slowly", "unit_fails_at_once"), SLOW_WINDOW, stop_when_lost=True)
    assert not g.passed
    slow, failed = g.checks
    assert failed.name == "unit_fails_at_once" and not failed.passed
    # cut short: far fewer samples than its window holds, and not a pass on the ones it had
    assert slow.evidence["samples"] < SLOW_WINDOW / 0.2 / 2, slow.evidence
    assert not slow.passed
    assert slow.message.startswith("not finished") and "unit_fails_at_once" in slow.message, slow.message


def test_a_run_grades_every_oracle_over_its_whole_window():
    g = grade(problem("unit_passes_slowly", "unit_fails_at_once"), 1.0)
    slow, failed = g.checks
    assert not g.passed and not failed.passed
    assert slow.passed and slow.evidence["samples"] >= 1.0 / 0.2, slow.evidence  # its own verdict, kept


def test_a_grade_that_may_still_pass_is_never_cut():
    g = grade(problem("unit_passes_slowly", "unit_passes_slowly"), 1.0, stop_when_lost=True)
    assert g.passed and all(c.passed and c.evidence["samples"] >= 1.0 / 0.2 for c in g.checks), g.checks
