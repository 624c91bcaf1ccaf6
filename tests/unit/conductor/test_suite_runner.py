"""The suite runner: resume after a kill, survive a failed run, and never overlap conflicting cells.

The run function here is a stand-in for the engine's ``run_problem``: it writes a record and an
index line exactly as the engine does (with the engine's own ``write_record``)."""

import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from sregym.conductor.episode import write_record
from sregym.conductor.suite import SuiteRunner, read_index
from sregym.core.errors import FaultError, PrerequisiteError, UserInputError
from sregym.core.problem import Problem
from sregym.core.record import AgentInfo, MitigationGrade, RunRecord, Versions
from sregym.core.settings import RunSettings


def problem(pid: str, app: str = "hotel", injector: str = "env_var", **target) -> Problem:
    return Problem.model_validate({
        "id": pid, "title": pid, "alert": "users see errors on the search page", "app": {"name": app},
        "faults": [{"id": "f", "injector": injector, "target": target}],
        "ground_truth": {"root_cause": "a wrong value in the config", "component": "geo", "mechanism": "m"},
        "oracles": {"mitigation": [{"name": "slo"}]}, "difficulty": "easy",
        "tags": {"layer": "application", "fault_family": "config", "failure_mode": "errors"},
    })


class FakeEngine:
    """Records every call; writes records like the engine; can fail or be 'killed' on chosen calls."""

    def __init__(self, *, kill_at: int | None = None, fail: set[str] = frozenset(), engine_writes_errors=False,
                 sleep: float = 0.0):
        self.calls: list[tuple[str, int, bool, str]] = []
        self.kill_at, self.fail, self.engine_writes_errors, self.sleep = kill_at, fail, engine_writes_errors, sleep
        self.active: list[tuple] = []
        self.overlaps: list[tuple] = []
        self.lock = threading.Lock()

    def __call__(self, prob: Problem, settings: RunSettings, *, out_dir: Path, cluster, suite):
        agent, seed, noise = settings.agent, settings.seed, settings.noise
        ns = prob.app.namespace or prob.app.name
        me = (prob.id, seed, noise, ns)
        with self.lock:
            self.calls.append((prob.id, seed, noise, ns))
            if self.kill_at is not None and len(self.calls) == self.kill_at:
                raise KeyboardInterrupt  # the process dies mid-run: no record, no index line
            self.overlaps += [(other, me) for other in self.active]
            self.active.append(me)
        try:
            time.sleep(self.sleep)
            rec = RunRecord(run_id=f"r-{prob.id}-{seed}-{int(noise)}-{len(self.calls)}", problem_id=prob.id,
                            spec_hash=prob.spec_hash(), suite=suite, app=prob.app.name, namespace=ns,
                            agent=AgentInfo(name=agent), seed=seed, noise=noise, difficulty="easy",
                            versions=Versions(sregym="0.1.0"))
            rec.grades.mitigation = MitigationGrade(passed=True)
            if prob.id in self.fail:
                if self.engine_writes_errors:
                    rec.status, rec.error = "error", "fault did not take effect"
                    write_record(rec, out_dir)
                raise FaultError("fault did not take effect")
            write_record(rec, out_dir)
            return rec
        finally:
            with self.lock:
                self.active.remove(me)


def runner(tmp_path, engine, problems, **kw) -> SuiteRunner:
    return SuiteRunner(problems, suite="lite", settings=RunSettings(agent="noop"), seeds=[0, 1], noise=[True, False],
                       out_dir=tmp_path,
                       run_fn=engine, console=Console(file=open("/dev/null", "w")), is_node_level=lambda i: i == "disk",
                       **kw)


def test_a_killed_suite_resumes_with_only_the_missing_cells(tmp_path):
    probs = [problem("p1"), problem("p2")]
    killed = FakeEngine(kill_at=6)
    with pytest.raises(KeyboardInterrupt):
        runner(tmp_path, killed, probs).run()
    assert len(read_index(tmp_path)) == 5
    # a kill can also cut the last index line short: it must not count as finished
    with (tmp_path / "index.jsonl").open("a") as f:
        f.write('{"run_id": "r-trunc", "problem_id": "p2", "agen')
    second = FakeEngine()
    summary = runner(tmp_path, second, probs).run(resume=True)
    assert summary.skipped == 5 and summary.ran == 3
    assert [c[:3] for c in second.calls] == [("p2", 0, False), ("p2", 1, True), ("p2", 1, False)]
    third = FakeEngine()
    assert runner(tmp_path, third, probs).run(resume=True).ran == 0 and third.calls == []


def test_rerunning_into_a_results_dir_without_resume_is_refused(tmp_path):
    runner(tmp_path, FakeEngine(), [problem("p1")]).run()
    with pytest.raises(UserInputError, match="--resume"):
        runner(tmp_path, FakeEngine(), [problem("p1")]).run()


@pytest.mark.parametrize("engine_writes_errors", [False, True])
def test_one_failed_run_is_an_error_cell_and_the_suite_goes_on(tmp_path, engine_writes_errors):
    engine = FakeEngine(fail={"p1"}, engine_writes_errors=engine_writes_errors)
    summary = runner(tmp_path, engine, [problem("p1"), problem("p2")], max_consecutive_errors=5).run()
    assert summary.statuses == {"error": 4, "completed": 4}
    index = read_index(tmp_path)
    assert len(index) == 8  # exactly one line per cell, whoever wrote the error record
    assert {e["status"] for e in index if e["problem_id"] == "p1"} == {"error"}
    # error cells count as finished; --retry-errors runs them again
    assert runner(tmp_path, FakeEngine(), [problem("p1"), problem("p2")]).run(resume=True).ran == 0
    again = FakeEngine()
    runner(tmp_path, again, [problem("p1"), problem("p2")], retry_errors=True).run(resume=True)
    assert {c[0] for c in again.calls} == {"p1"} and len(again.calls) == 4


def test_an_error_record_carries_the_problem_and_the_error(tmp_path):
    from sregym.report.records import load_records

    runner(tmp_path, FakeEngine(fail={"p1"}), [problem("p1"), problem("p2")], max_consecutive_errors=9).run()
    errors = [r for r in load_records([tmp_path]) if r.status == "error"]
    assert len(errors) == 4
    assert errors[0].problem_id == "p1" and "FaultError: fault did not take effect" in errors[0].error


def test_several_failures_in_a_row_stop_the_suite(tmp_path):
    engine = FakeEngine(fail={"p1"})
    with pytest.raises(FaultError):
        runner(tmp_path, engine, [problem("p1"), problem("p2")], max_consecutive_errors=3).run()
    assert len(engine.calls) == 3


def test_a_target_one_problem_does_not_find_is_that_cells_error_only(tmp_path):
    calls = []

    def picky(prob, settings, **kw):
        calls.append(prob.id)
        if prob.id == "p1":
            raise UserInputError("target: no running pod in namespace shop matches StatefulSet/db")
        return FakeEngine()(prob, settings, **kw)

    summary = runner(tmp_path, picky, [problem("p1"), problem("p2")], max_consecutive_errors=9).run()
    assert summary.statuses == {"error": 4, "completed": 4} and len(calls) == 8


def test_an_unknown_agent_stops_at_once(tmp_path):
    from sregym.core.errors import UnknownNameError

    def unknown(*a, **kw):
        raise UnknownNameError("agent", "nope", ["noop", "random"])

    with pytest.raises(UnknownNameError):
        runner(tmp_path, unknown, [problem("p1"), problem("p2")]).run()
    assert len(read_index(tmp_path)) == 1


def test_a_missing_prerequisite_stops_at_once(tmp_path):
    def broken(*a, **kw):
        raise PrerequisiteError("helm not found")

    with pytest.raises(PrerequisiteError):
        runner(tmp_path, broken, [problem("p1")]).run()
    assert len(read_index(tmp_path)) == 1  # the failed cell is still recorded


def test_parallel_runs_never_overlap_conflicting_cells(tmp_path):
    probs = [problem("a1", app="hotel"), problem("a2", app="hotel"), problem("b1", app="shop"),
             problem("n1", app="astro", injector="disk"), problem("n2", app="media", injector="disk")]
    engine = FakeEngine(sleep=0.05)
    summary = runner(tmp_path, engine, probs, parallel=3).run()
    assert summary.ran == 20 and summary.statuses == {"completed": 20}
    assert engine.overlaps, "cells that do not conflict should have run side by side"
    for x, y in engine.overlaps:
        assert x[3] != y[3], f"two runs shared namespace {x[3]}"
        assert not (x[0].startswith("n") and y[0].startswith("n")), "two node-level faults ran at once"
    assert {c[3] for c in engine.calls if c[0].startswith("a")} >= {"hotel", "hotel-p1"}


def test_two_cells_of_one_app_start_together_in_separate_namespaces(tmp_path):
    engine = FakeEngine(sleep=0.2)
    runner(tmp_path, engine, [problem("a1", app="hotel")], parallel=2).run()
    first_two = {c[3] for c in engine.calls[:2]}
    assert first_two == {"hotel", "hotel-p1"}
    assert any(x[3] != y[3] for x, y in engine.overlaps)
