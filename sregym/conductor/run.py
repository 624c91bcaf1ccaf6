"""One run, following DESIGN.md "One run": prepare, baseline, inject, agent, grade, recover, record.

``run_problem`` is what ``sregym run`` and the suite runner call: a script over ``Episode``, which
owns the lifecycle (whatever happens, faults are recovered shielded from cancellation, the journal
is closed only when everything was recovered, and the record is written with the status and error;
then the original error propagates so the CLI exits with its code).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from sregym.cluster.handle import ClusterHandle
from sregym.conductor.agent import agent_info, build_agent, is_privileged, run_agent
from sregym.conductor.episode import AppDriver, Episode, with_background
from sregym.conductor.grading import complete_grades, grade_diagnosis, grade_mitigation
from sregym.core.problem import Budgets, Problem
from sregym.core.record import RunRecord
from sregym.core.seeds import derive_seed


def budgets_for(problem: Problem, steps: int | None, seconds: float | None, tokens: int | None) -> Budgets:
    b = problem.budgets
    return Budgets(steps=steps or b.steps, seconds=seconds or b.seconds, tokens=tokens or b.tokens)


def forbidden_words(problem: Problem) -> list[str]:
    """Words the agent's prompt must never contain: they would name the problem or the primitive.
    (Fault ids are author-chosen labels such as ``greeting``; an alert may use the same word.)"""
    return sorted({problem.id, *(f.injector for f in problem.faults)})


async def run_problem(problem: Problem, *, agent: str, seed: int, noise: bool, out_dir: Path,
                      cluster: ClusterHandle, budget_steps: int | None = None, budget_seconds: float | None = None,
                      budget_tokens: int | None = None, suite: str | None = None, console: Console | None = None,
                      driver: AppDriver | None = None, baseline_window: float = 30.0, grade_window: float = 60.0,
                      verify_timeout: float = 90.0, journal_dir: Path | None = None,
                      plugin_dirs: list[Path] | None = None, agent_options: dict[str, Any] | None = None
                      ) -> RunRecord:
    """Run ``problem`` once with ``agent`` and write its record to ``out_dir/<run_id>.json``."""
    runner = build_agent(agent, agent_options)  # an unknown agent fails here, before any change
    budgets = budgets_for(problem, budget_steps, budget_seconds, budget_tokens)
    async with Episode(problem, cluster=cluster, seed=seed, noise=noise, agent_seconds=budgets.seconds,
                       driver=driver, console=console, verify_timeout=verify_timeout, journal_dir=journal_dir,
                       plugin_dirs=plugin_dirs or [], record_to=out_dir, agent=agent_info(agent, runner),
                       suite=suite) as ep:
        phases, record = ep.phases, ep.record
        with phases.phase("prepare", f"app {problem.app.name}"):
            app = await ep.deploy()
            phases.note(f"namespace {app.namespace} ({'reused' if app.reused else 'deployed'})")
        with phases.phase("baseline", f"{baseline_window:.0f}s"):
            await ep.measure_baseline(baseline_window, require_healthy=True)
        with phases.phase("inject", f"{len(problem.faults)} fault(s)"):
            player = await ep.inject()
        if is_privileged(runner):
            runner.bind(ep)
        await ep.watch_agent_objects()
        with phases.phase("agent", agent):
            record.trajectory = await with_background(player.play_rest, run_agent(
                agent=agent, runner=runner, cluster=cluster, app=app, alert=problem.alert, budgets=budgets,
                seed=derive_seed(seed, "agent"), forbidden_words=forbidden_words(problem), note=phases.note,
                on_server=ep.journal.process, on_sandbox=ep.journal.sandbox))
        await ep.stop_noise()
        with phases.phase("grade", f"window {grade_window:.0f}s"):
            record.grades.diagnosis = await grade_diagnosis(problem, record.trajectory)
            record.grades.mitigation = await grade_mitigation(problem, app, cluster, record.baseline, grade_window)
            record.grades = complete_grades(record.grades, record.trajectory, problem.ground_truth, budgets)
    return record
