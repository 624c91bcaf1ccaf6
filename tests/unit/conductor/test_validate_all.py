"""``validate --all`` in the conductor: its log is the suite runner's resumable index, so a run
killed mid-way resumes with exactly the pairs not yet valid, and each result lands as it finishes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import anyio
from rich.console import Console

from sregym.conductor import validate_all as va
from sregym.conductor.validate import ProblemValidation, Step, valid_in_log, validation_log



def lp(pid: str) -> SimpleNamespace:
    return SimpleNamespace(id=pid, problem=SimpleNamespace(id=pid))


def test_results_land_in_the_log_and_a_resume_runs_only_what_is_not_yet_valid(tmp_path: Path, monkeypatch):
    log = tmp_path / "validate.jsonl"
    outcome = {("a", 0): True, ("a", 1): False, ("b", 0): True, ("b", 1): True}

    async def fake_validate(problem, *, seed, noise, **_):
        ok = outcome[(problem.id, seed)]
        return ProblemValidation(problem.id, [Step("only", ok, "", 1.0)], seed=seed, noise=noise)

    monkeypatch.setattr(va, "validate_problem", fake_validate)
    monkeypatch.setattr(va, "checkout", lambda: "test")
    console = Console(file=open(tmp_path / "out.txt", "w"))  # noqa: SIM115 - closed with the test dir
    problems = [lp("a"), lp("b")]
    runs = va.runs_to_validate(problems, 2, log=log, resume=True, noise=True, console=console)
    failed = anyio.run(lambda: va.validate_all(runs, cluster=None, driver=None, grade_window=1, verify_timeout=1,
                                               console=console, log=log, noise=True))
    assert failed == 1 and len(validation_log(log).entries()) == 4
    again = va.runs_to_validate(problems, 2, log=log, resume=True, noise=True, console=console)
    assert [(p.id, s) for p, s in again] == [("a", 1)]
    # the latest line of a pair decides: a valid rerun of ("a", 1) makes it done
    outcome[("a", 1)] = True
    anyio.run(lambda: va.validate_all(again, cluster=None, driver=None, grade_window=1, verify_timeout=1,
                                      console=console, log=log, noise=True))
    assert va.runs_to_validate(problems, 2, log=log, resume=True, noise=True, console=console) == []
    assert valid_in_log(log, noise=True) == {("a", 0), ("a", 1), ("b", 0), ("b", 1)}
    assert valid_in_log(log, noise=False) == set()
