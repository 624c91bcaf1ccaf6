"""One run, following DESIGN.md "One run": prepare, baseline, inject, agent, grade, recover, record.

``run_problem`` is what ``sregym run`` and the suite runner call. Whatever happens (a fault that
does not take effect, an agent crash, Ctrl-C), the recover phase runs shielded from cancellation,
the journal is closed only when everything was recovered, and a record is written with the
status and error; then the original error propagates so the CLI exits with its code.
"""

from __future__ import annotations

import platform
import secrets
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from rich.console import Console

import sregym
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.kube import helm_path
from sregym.conductor import agent_objects
from sregym.conductor.agent import agent_info, build_agent, run_agent
from sregym.conductor.appdriver import AppDriver, DeployedApp, app_driver
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.grading import complete_grades, grade_diagnosis, grade_mitigation
from sregym.conductor.journal import Journal, RunHeader
from sregym.conductor.oracle_agent import OracleAgent
from sregym.conductor.progress import Phases
from sregym.conductor.scheduler import TimelinePlayer
from sregym.conductor.timeline import incident_onset, resolve_timeline
from sregym.core.jsonlines import append_json_line
from sregym.core.problem import Budgets
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.errors import ClusterError, SregymError
from sregym.core.problem import Problem
from sregym.core.record import RunRecord, Versions
from sregym.core.seeds import derive_seed

INDEX_FILE = "index.jsonl"
T = TypeVar("T")


def new_run_id() -> str:
    """A neutral id: it labels fault-plane objects, so it must not name the problem or the fault."""
    return datetime.now(timezone.utc).strftime("r%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def budgets_for(problem: Problem, steps: int | None, seconds: float | None, tokens: int | None) -> Budgets:
    b = problem.budgets
    return Budgets(steps=steps or b.steps, seconds=seconds or b.seconds, tokens=tokens or b.tokens)


def noise_exclusions(problem: Problem) -> list[str]:
    """Components that noise able to cure or mask the fault (restarts, lost packets) must not
    touch: the root-cause targets, the faulty component, and the problem's own exclusions. Noise
    that does neither (log lines, a few extra requests) spares only the problem's own exclusions
    (its params), so "touched by noise" proves no component innocent."""
    names = {problem.ground_truth.component, *problem.noise.exclude}
    names |= {f.target.name for f in problem.faults if f.target.name}
    return sorted(n for n in names if n)


def forbidden_words(problem: Problem) -> list[str]:
    """Words the agent's prompt must never contain: they would name the problem or the primitive.
    (Fault ids are author-chosen labels such as ``greeting``; an alert may use the same word.)"""
    return sorted({problem.id, *(f.injector for f in problem.faults)})


def unwrap(error: BaseException) -> BaseException:
    """The one error inside (nested) single-member exception groups, so it keeps its exit code."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def versions(cluster: ClusterHandle) -> Versions:
    v = Versions(sregym=sregym.__version__, provider=cluster.provider, python=platform.python_version())
    try:
        v.kubernetes = cluster.kube.server_version()
    except SregymError:
        pass
    try:
        out = subprocess.run([helm_path(), "version", "--short"], capture_output=True, text=True, timeout=30)
        v.helm = out.stdout.strip() or None
    except (SregymError, OSError, subprocess.SubprocessError):
        pass
    return v


def ensure_hidden_namespace(kube: Any) -> None:
    """The fault plane's namespace; created with no telling labels if it does not exist."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        kube.core.read_namespace(HIDDEN_NAMESPACE)
    except ApiException as e:
        if e.status != 404:
            raise ClusterError(f"cannot read namespace {HIDDEN_NAMESPACE}: {e.reason}") from None
        kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=HIDDEN_NAMESPACE)))


def write_record(record: RunRecord, out_dir: Path) -> Path:
    """``<out>/<run_id>.json``; a suite run also appends a line to ``<out>/index.jsonl``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{record.run_id}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(record.model_dump_json(indent=2))
    tmp.replace(path)
    if record.suite:
        line = {"run_id": record.run_id, "problem_id": record.problem_id, "agent": record.agent.name,
                "seed": record.seed, "noise": record.noise, "status": record.status, "record": path.name}
        append_json_line(out_dir / INDEX_FILE, line)
    return path


async def with_background(background: Callable[[], Awaitable[Any]], foreground: Awaitable[T]) -> T:
    """Await ``foreground`` while ``background`` runs; cancel the background when it is done.
    An error of the foreground is raised as itself, not inside an exception group."""
    result: list[T] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(background)
            try:
                result.append(await foreground)
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise unwrap(group) from None
    return result[0]


async def run_problem(problem: Problem, *, agent: str, seed: int, noise: bool, out_dir: Path,
                      cluster: ClusterHandle, budget_steps: int | None = None, budget_seconds: float | None = None,
                      budget_tokens: int | None = None, suite: str | None = None, console: Console | None = None,
                      driver: AppDriver | None = None, baseline_window: float = 30.0, grade_window: float = 60.0,
                      verify_timeout: float = 90.0, journal_dir: Path | None = None,
                      plugin_dirs: list[Path] | None = None, agent_options: dict[str, Any] | None = None
                      ) -> RunRecord:
    """Run ``problem`` once with ``agent`` and write its record to ``out_dir/<run_id>.json``.

    ``plugin_dirs`` are the ``--plugins`` folders this process imported; the journal keeps them so
    ``sregym cleanup`` can rebuild plug-in injectors after a crash."""
    driver = driver or app_driver()
    runner = build_agent(agent, agent_options)  # an unknown agent fails here, before any change
    run_id = new_run_id()
    budgets = budgets_for(problem, budget_steps, budget_seconds, budget_tokens)
    phases = Phases(console, label=problem.id)
    record = RunRecord(run_id=run_id, problem_id=problem.id, spec_hash=problem.spec_hash(), suite=suite,
                       app=problem.app.name, namespace=problem.app.namespace or "", agent=agent_info(agent, runner),
                       seed=seed, noise=noise, difficulty=problem.difficulty.value,
                       tags=problem.tags.model_dump(mode="json"), versions=versions(cluster))
    record.timeline = resolve_timeline(problem, seed, noise, agent_seconds=budgets.seconds)
    journal = Journal(run_id, journal_dir)
    plane: FaultPlane | None = None
    failure: BaseException | None = None
    app: DeployedApp | None = None
    before_agent: agent_objects.Snapshot | None = None
    try:
        with phases.phase("prepare", f"app {problem.app.name}"):
            app = await anyio.to_thread.run_sync(driver.deploy, problem.app, cluster)
            record.namespace = app.namespace
            await anyio.to_thread.run_sync(ensure_hidden_namespace, cluster.kube)
            phases.note(f"namespace {app.namespace} ({'reused' if app.reused else 'deployed'})")
        with phases.phase("baseline", f"{baseline_window:.0f}s"):
            ok, detail = await anyio.to_thread.run_sync(driver.health, app, cluster)
            if not ok:
                raise ClusterError(f"app {problem.app.name} is not healthy before injection: {detail}",
                                   hint=f"kubectl -n {app.namespace} get pods")
            record.baseline = await anyio.to_thread.run_sync(driver.baseline, app, cluster, baseline_window)
        journal.start(RunHeader(run_id=run_id, problem_id=problem.id, kubeconfig=str(cluster.kubeconfig),
                                context=cluster.context, plugins=[str(p.resolve()) for p in plugin_dirs or []]))
        plane = FaultPlane(journal=journal, kube=cluster.kube, app_namespace=app.namespace, run_id=run_id,
                           run_seed=seed, exclude=noise_exclusions(problem),
                           reapply=not problem.ground_truth.restart_cures)
        player = TimelinePlayer(plane, problem.faults, record.timeline, verify_timeout=verify_timeout,
                                noise_params={"duration": problem.noise.duration_seconds,
                                              "exclude": sorted(problem.noise.exclude)}, note=phases.note)
        with phases.phase("inject", f"{len(problem.faults)} fault(s)"):
            await player.play_until(incident_onset(record.timeline))
        if agent == "oracle":
            deployed = app
            runner = OracleAgent(plane, problem.ground_truth, health=lambda: driver.health(deployed, cluster))

        # what is in the app namespace now: whatever appears by the end is the agent's (teardown)
        before_agent = await anyio.to_thread.run_sync(agent_objects.snapshot, cluster, app.namespace)
        journal.before_agent(app.name, before_agent.to_dict())  # a killed run's cleanup needs it
        with phases.phase("agent", agent):
            record.trajectory = await with_background(player.play_rest, run_agent(
                agent=agent, runner=runner, cluster=cluster, app=app, alert=problem.alert, budgets=budgets,
                seed=derive_seed(seed, "agent"), forbidden_words=forbidden_words(problem), note=phases.note,
                on_server=journal.process, on_sandbox=journal.sandbox))
        for err in await player.stop_noise():
            phases.note(f"noise recover failed: {err}")
        with phases.phase("grade", f"window {grade_window:.0f}s"):
            record.grades.diagnosis = await grade_diagnosis(problem, record.trajectory)
            record.grades.mitigation = await grade_mitigation(problem, app, cluster, record.baseline, grade_window)
            record.grades = complete_grades(record.grades, record.trajectory, problem.ground_truth, budgets)
    except BaseException as e:  # noqa: BLE001 - recorded, recovered, then re-raised below
        failure = e = unwrap(e)
        aborted = isinstance(e, (KeyboardInterrupt, anyio.get_cancelled_exc_class()))
        record.status = "aborted" if aborted else "error"
        record.error = "interrupted" if aborted else str(e)
    finally:
        with anyio.CancelScope(shield=True):
            recovered = await _recover(plane, phases, record, app, driver, cluster)
            # -- teardown of what the agent made: recorded, created objects deleted ------------
            if before_agent is not None and app is not None:
                try:
                    record.agent_objects = await anyio.to_thread.run_sync(
                        agent_objects.teardown, cluster, before_agent, app.name)
                except SregymError as e:
                    phases.note(f"could not tear down what the agent made: {e}")
                    recovered = False  # the journal stays open: `sregym cleanup` tries again
                for obj in record.agent_objects:
                    phases.note(f"agent {obj.change} {obj.resource}/{obj.name}"
                                + (" (removed)" if obj.removed else f": {obj.error}" if obj.error else ""))
            # closed only now: a kill before this point leaves the journal open, so `sregym cleanup`
            # finds the faults and what the agent made (its journaled snapshot) and removes them
            left = [o for o in record.agent_objects if o.change == "created" and not o.removed]
            if recovered and not left:
                journal.close()
            elif recovered:
                phases.note("some objects the agent made were not removed; run `sregym cleanup`")
            record.phases = phases.durations
            record.mechanisms = plane.mechanisms() if plane else {}
            record.reapplied = list(plane.reapplied) if plane else []
            record.ended_at = datetime.now(timezone.utc)
            diag, mit = record.trajectory.submission("diagnosis"), record.trajectory.submission("mitigation")
            record.ttd_s = diag.t if diag else None
            record.ttm_s = mit.t if mit else None
            path = write_record(record, out_dir)
            phases.note(f"record: {path}")
    if failure is not None:
        raise failure
    return record


async def _recover(plane: FaultPlane | None, phases: Phases, record: RunRecord,
                   app: DeployedApp | None, driver: AppDriver, cluster: ClusterHandle) -> bool:
    """Recover every fault; whether all came off (the caller closes the journal after its teardown)."""
    if plane is None:
        return False
    with phases.phase("recover"):
        errors = await plane.recover_all()
        if errors:
            record.status = "error"
            record.error = "; ".join([*filter(None, [record.error]), *errors])
            phases.note("some faults were not recovered; run `sregym cleanup`")
            return False
        if app is not None:
            ok, detail = await anyio.to_thread.run_sync(driver.health, app, cluster)
            if not ok:
                phases.note(f"after recovery the app is not healthy yet: {detail}")
    return True

