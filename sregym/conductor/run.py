"""One run, following DESIGN.md "One run": prepare, baseline, inject, agent, grade, recover, record.

``run_problem`` is what ``sregym run`` and the suite runner call: a script over ``Episode``, which
owns the lifecycle (whatever happens, faults are recovered shielded from cancellation, the journal
is closed only when everything was recovered, and the record is written with the status and error;
then the original error propagates so the CLI exits with its code).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

from sregym.apps import app_driver
from sregym.cluster.handle import ClusterHandle
from sregym.conductor.agent import agent_info, agent_session, build_agent, is_privileged
from sregym.conductor.episode import AppDriver, Episode, unwrap, with_background
from sregym.conductor.scheduler import TimelinePlayer
from sregym.conductor.grading import complete_grades, grade_diagnosis, grade_mitigation
from sregym.core.errors import ClusterError
from sregym.core.problem import Budgets, Problem
from sregym.core.record import RunRecord
from sregym.core.settings import RunSettings
from sregym.core.seeds import derive_seed
from sregym.core.trajectory import ToolCall


def budgets_for(problem: Problem, settings: RunSettings) -> Budgets:
    """The problem's budgets, with those the settings set instead."""
    b = problem.budgets
    return Budgets(steps=settings.budget_steps or b.steps, seconds=settings.budget_seconds or b.seconds,
                   tokens=settings.budget_tokens or b.tokens)


def forbidden_words(problem: Problem) -> list[str]:
    """Words the agent's prompt must never contain: they would name the problem or the primitive.
    (Fault ids are author-chosen labels such as ``greeting``; an alert may use the same word.)"""
    return sorted({problem.id, *(f.injector for f in problem.faults)})


async def run_problem(problem: Problem, settings: RunSettings, *, out_dir: Path, cluster: ClusterHandle,
                      suite: str | None = None, console: Console | None = None, driver: AppDriver | None = None,
                      journal_dir: Path | None = None, runner: Any = None,
                      on_tool_call: Callable[[ToolCall], None] | None = None) -> RunRecord:
    """Run ``problem`` once as ``settings`` say and write its record to ``out_dir/<run_id>.json``.

    ``runner``: an agent already built (the Gymnasium env's policy channel) instead of the one
    ``settings.agent`` names; ``on_tool_call`` is told each tool call as the server records it."""
    agent, grade_window = settings.agent, settings.grade_window
    if runner is None:
        runner = build_agent(agent, settings.agent_options)  # an unknown agent fails here, before any change
    budgets = budgets_for(problem, settings)
    async with Episode(problem, cluster=cluster, seed=settings.seed, noise=settings.noise,
                       agent_seconds=budgets.seconds, driver=driver or app_driver(settings.charts_dirs),
                       console=console, verify_timeout=settings.verify_timeout, journal_dir=journal_dir,
                       plugin_dirs=settings.plugins, record_to=out_dir, agent=agent_info(agent, runner),
                       suite=suite, settings=settings) as ep:
        phases, record = ep.phases, ep.record
        with phases.phase("prepare", f"app {problem.app.name}"):
            early = await ep.endpoints()  # the namespace and the observability URLs the agent plane needs
        ep.start_journal()  # before the agent plane: it records the sandbox and helper processes as they start
        deployed = anyio.Event()
        incident_ready = anyio.Event()
        players: list[TimelinePlayer] = []

        async def start_incident() -> None:
            with phases.phase("prepare", f"app {problem.app.name}"):
                app = await ep.deploy()
                phases.note(f"namespace {app.namespace} ({'reused' if app.reused else 'deployed'})")
            if early is not None and early.namespace != app.namespace:
                raise ClusterError(f"the app was deployed in {app.namespace}, the agent plane opened on {early.namespace}")
            ep.open_fault_plane()
            deployed.set()
            with phases.phase("baseline", f"{settings.baseline_window:.0f}s"):
                await ep.measure_baseline(settings.baseline_window, require_healthy=True)
            with phases.phase("inject", f"{len(problem.faults)} fault(s)"):
                players.append(await ep.inject())
            incident_ready.set()

        async def open_session(stack: AsyncExitStack) -> Any:
            if early is None:
                await deployed.wait()
            session = agent_session(
                agent=agent, runner=runner, cluster=cluster, app=early or ep.app, alert=problem.alert, budgets=budgets,
                forbidden_words=forbidden_words(problem), note=phases.note, on_server=ep.journal.process,
                on_sandbox=ep.journal.sandbox, on_tool_call=on_tool_call)
            with phases.phase("sandbox", "the agent plane, alongside", spinner=False):
                return await stack.enter_async_context(session)

        # The agent plane (its access, API proxy, sandbox and tool server: seconds of pod start and
        # network fence) opens while the release is checked, the baseline is measured and the faults
        # go in; nothing in it acts until the agent is handed its task, after all of them.
        try:
            async with anyio.create_task_group() as incident, AsyncExitStack() as stack:
                incident.start_soon(start_incident)
                ready = await open_session(stack)
                await incident_ready.wait()
                player = players[0]
                if is_privileged(runner):
                    runner.bind(ep)
                await ep.watch_agent_objects()
                with phases.phase("agent", agent):
                    record.trajectory = await with_background(
                        player.play_rest, ready.run(derive_seed(settings.seed, "agent")))
        except BaseExceptionGroup as group:
            raise unwrap(group) from None
        await ep.stop_noise()
        with phases.phase("grade", f"window {grade_window:.0f}s"
                          + (f" after {settings.grade_settle:.0f}s to settle" if settings.grade_settle else "")):
            await anyio.sleep(settings.grade_settle)  # recorded with the run's settings
            record.grades.diagnosis = await grade_diagnosis(problem, record.trajectory)
            assert ep.app is not None
            record.grades.mitigation = await grade_mitigation(problem, ep.app, cluster, record.baseline, grade_window)
            record.grades = complete_grades(record.grades, record.trajectory, problem.ground_truth, budgets)
    return record
