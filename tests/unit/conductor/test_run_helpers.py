"""Pure pieces of one run: neutral run ids, budgets, what noise and the prompt must avoid, the
record on disk, and running the agent beside the timeline."""

from __future__ import annotations

import json
import re

import anyio
import pytest

from sregym.conductor.episode import Episode, new_run_id, noise_exclusions, with_background, write_record
from sregym.conductor.run import budgets_for, forbidden_words
from sregym.core.errors import PrerequisiteError
from sregym.core.problem import Problem
from sregym.core.record import AgentInfo, RunRecord, Versions
from sregym.core.settings import RunSettings


@pytest.fixture()
def problem() -> Problem:
    return Problem.model_validate({
        "id": "geo_env_missing", "title": "t", "alert": "Hotel search fails for most users.",
        "app": {"name": "hotel"},
        "faults": [{"id": "geo_env", "injector": "env_var", "target": {"kind": "Deployment", "name": "geo"}}],
        "noise": {"exclude": ["mongodb-geo"]},
        "ground_truth": {"root_cause": "geo lost its database address", "component": "geo", "mechanism": "env"},
        "oracles": {"mitigation": [{"name": "slo"}]},
        "difficulty": "easy", "tags": {"layer": "kubernetes", "fault_family": "env", "failure_mode": "errors"},
        "budgets": {"steps": 30, "seconds": 600},
    })


def test_run_ids_are_neutral_and_unique():
    ids = {new_run_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"r\d{8}-\d{6}-[0-9a-f]{6}", i) for i in ids)
    assert re.fullmatch(r"v\d{8}-\d{6}-[0-9a-f]{6}", new_run_id("v"))  # a validation's


def test_budget_flags_override_the_problem(problem: Problem):
    assert budgets_for(problem, RunSettings()).model_dump() == {"steps": 30, "seconds": 600, "tokens": None}
    given = RunSettings(budget_steps=5, budget_seconds=60, budget_tokens=1000)
    assert budgets_for(problem, given).model_dump() == {"steps": 5, "seconds": 60, "tokens": 1000}


def test_noise_never_touches_the_root_cause(problem: Problem):
    assert noise_exclusions(problem) == ["geo", "mongodb-geo"]


def test_the_prompt_must_not_name_the_problem_or_fault(problem: Problem):
    assert forbidden_words(problem) == ["env_var", "geo_env_missing"]


def test_a_suite_record_is_indexed(tmp_path, problem: Problem):
    record = RunRecord(run_id="r1", problem_id=problem.id, spec_hash=problem.spec_hash(), suite="lite", app="hotel",
                       namespace="hotel", agent=AgentInfo(name="noop"), seed=1, noise=True, difficulty="easy",
                       versions=Versions(sregym="0"))
    path = write_record(record, tmp_path)
    assert RunRecord.model_validate_json(path.read_text()).run_id == "r1"
    [line] = (tmp_path / "index.jsonl").read_text().splitlines()
    assert json.loads(line)["record"] == "r1.json"


def test_the_agent_runs_beside_the_timeline_and_stops_it():
    stopped = []

    async def timeline():
        try:
            await anyio.sleep(60)
        finally:
            stopped.append(True)

    async def agent():
        await anyio.sleep(0.05)
        return "trajectory"

    assert anyio.run(with_background, timeline, agent()) == "trajectory"
    assert stopped == [True]


def test_an_agent_error_surfaces_as_itself():
    async def agent():
        raise PrerequisiteError("no agent plane")

    with pytest.raises(PrerequisiteError, match="no agent plane"):
        anyio.run(with_background, anyio.sleep_forever, agent())


def test_recover_says_whether_every_fault_came_off_so_the_run_closes_its_journal(problem: Problem, tmp_path):
    """An episode closes its journal only when every fault came off (it once fell off the end
    with None, so every successful run left its journal open for `sregym cleanup`)."""
    class Plane:
        def __init__(self, errors):
            self.errors = errors

        async def recover_all(self):
            return self.errors

    def episode(errors):
        ep = Episode(problem, cluster=None, seed=0, noise=False, agent_seconds=1, driver=object(),
                     journal_dir=tmp_path)
        ep.plane = Plane(errors)
        ep.record = RunRecord.model_construct(status="completed", error=None)
        return ep

    clean = episode([])
    assert anyio.run(clean._recover_left) is True
    failed = episode(["orders_blocks: still mounted"])
    assert anyio.run(failed._recover_left) is False and failed.record.status == "error"
    assert "orders_blocks: still mounted" in failed.record.error
    no_plane = episode([])  # no fault went in: nothing to recover
    no_plane.plane = None
    assert anyio.run(no_plane._recover_left) is True


def test_a_journal_started_before_any_fault_is_closed_and_one_never_started_is_never_written(problem: Problem,
                                                                                             tmp_path):
    """The agent plane opens alongside the release check, so the journal starts before the fault
    plane (it records the sandbox and helper processes): a run that fails before any fault closes
    it (its plane closed the sandbox first); one that never started it leaves no file."""
    def leave(started: bool) -> Episode:
        ep = Episode(problem, cluster=None, seed=0, noise=False, agent_seconds=1, driver=object(),
                     journal_dir=tmp_path / str(started))
        ep.cluster = type("C", (), {"kubeconfig": "/k", "context": None})()
        if started:
            ep.start_journal()
            ep.start_journal()  # once
        anyio.run(ep.__aexit__, RuntimeError, RuntimeError("the release check failed"), None)
        return ep

    started = leave(True)
    assert started.journal.path.parent.name == "closed"
    assert started.journal.path.read_text().count('"op":"run"') == 1
    assert not (tmp_path / "False").exists() or not any((tmp_path / "False").rglob("*.jsonl"))
