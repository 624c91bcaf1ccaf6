"""One episode on the live cluster: the lifecycle a run, a validation and a suite cell share.

``Episode`` is an async context manager that owns the invariants of DESIGN.md "One run", so the
scripts over it (``run.run_problem``, ``validate.validate_problem``) say only what they do:

- one neutral run id (``new_run_id``) names the journal, the fault plane's objects and the record;
- ``deploy`` brings the app up and makes the hidden namespace; ``healthy`` and ``measure_baseline``
  come before any change;
- ``inject`` starts the journal *before* the first change, opens the fault plane and plays the
  timeline to the incident onset; every change goes through the plane, so it is journaled;
- on leaving, whatever happened (an error, Ctrl-C, cancellation), noise and faults are recovered
  shielded from cancellation, then what the agent made is torn down; the journal is closed only
  when all of it came off, else it stays open for ``sregym cleanup``;
- an episode that keeps a record writes it last, with the status and error of what went wrong,
  and the error then propagates as itself (not inside an exception group) so the CLI exits with
  its code.
"""

from __future__ import annotations

import functools
import platform
import secrets
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread
from rich.console import Console

import sregym
from sregym.apps import DeployedApp, app_driver, serving_diagnosis
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.kube import helm_path
from sregym.conductor import agent_objects
from sregym.conductor.faultplane import FaultPlane, serve_volumes
from sregym.conductor.journal import Journal, RunHeader
from sregym.conductor.progress import Phases
from sregym.conductor.scheduler import TimelinePlayer
from sregym.conductor.timeline import incident_onset, resolve_timeline
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.errors import ClusterError, SregymError
from sregym.core.jsonlines import append_json_line
from sregym.core.problem import AppRef, Problem
from sregym.core.record import AgentInfo, RunRecord, Versions
from sregym.core.settings import RunSettings
from sregym.injectors import INJECTORS

INDEX_FILE = "index.jsonl"
HEALTHY_BEFORE_BASELINE_S = 60.0  # how long an app may take to be healthy again before a baseline refuses it
BASELINE_MET_WITHIN_S = 240.0  # how long an app whose pods are ready may take to serve its users as its SLOs ask
T = TypeVar("T")


class AppDriver(Protocol):
    """What an episode needs from the apps layer (``sregym.apps.app_driver`` provides it; a test
    may pass any object with these three methods)."""

    def deploy(self, app: AppRef, cluster: ClusterHandle, progress: Callable[[str], None]) -> DeployedApp:
        """Install the app (or reuse a healthy install at the same chart hash) and wait until Ready;
        ``progress`` is told, one line each, what a person should know (shown with the run's phases)."""

    def health(self, deployed: DeployedApp, cluster: ClusterHandle) -> tuple[bool, str]:
        """Whether every workload is ready and no pod crash-loops; the detail says what is not."""

    def baseline(self, deployed: DeployedApp, cluster: ClusterHandle, window_s: float) -> dict[str, Any]:
        """SLO measurements over ``window_s`` seconds, before any fault."""


def missed_objectives(baseline: dict[str, Any]) -> list[str]:
    """The SLOs a baseline measured below their objectives (``name value vs objective``)."""
    def shown(value: Any) -> str:
        return "no data" if value is None else f"{value:.3g}"

    return [f"{name} {shown(m.get('value'))} (objective {m.get('objective')})"
            for name, m in (baseline.get("slos") or {}).items() if isinstance(m, dict) and m.get("met") is False]


async def baseline_meeting_objectives(driver: AppDriver, app: DeployedApp, cluster: ClusterHandle, window: float, *,
                                      within_s: float, note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """``driver.baseline``, measured again until every SLO meets its objective, for up to
    ``within_s`` seconds; then ClusterError. The slo oracle grades against the baseline, so a
    baseline taken while users were not served (pods ready, every request timing out: hotel search
    right after a fresh install, measured 2026-11-28) would pass a run whose fault is still there."""
    deadline = time.monotonic() + within_s
    while True:
        baseline = await anyio.to_thread.run_sync(driver.baseline, app, cluster, window)
        missed = missed_objectives(baseline)
        if not missed:
            return baseline
        if time.monotonic() >= deadline:
            shows = await anyio.to_thread.run_sync(_what_the_app_shows, app)
            raise ClusterError(f"app {app.name}'s users are not served before the fault: its SLOs miss their "
                               f"objectives ({'; '.join(missed)}) after {within_s:.0f} s of measuring; no run is "
                               f"graded against such a baseline{shows}",
                               hint=f"kubectl -n {app.namespace} get pods,events; then sregym cluster status")
        if note is not None:
            note(f"baseline: the app's SLOs miss their objectives ({'; '.join(missed)}); measuring again")
        await anyio.sleep(min(3.0, max(0.0, deadline - time.monotonic())))


def _what_the_app_shows(app: DeployedApp) -> str:
    """``; the app shows: ...`` from its services' own metrics (where users are failed), or nothing."""
    if not app.prometheus_url:
        return ""
    try:
        lines = serving_diagnosis(app.prometheus_url, app.namespace)
    except ClusterError:  # the refusal stands without it
        return ""
    return f"; the app shows: {'; '.join(lines[:8])}" if lines else "; its services' metrics show nothing wrong"


def new_run_id(kind: str = "r") -> str:
    """A neutral id (``r`` a run, ``v`` a validation): it labels fault-plane objects, so it must
    not name the problem or the fault."""
    return kind + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


def noise_exclusions(problem: Problem) -> list[str]:
    """The run's root-cause components: the root-cause targets, the faulty component, and the
    problem's own exclusions. Noise spares them only where it could cure or mask the fault, or where
    its undo could cross the fault's (``sregym.injectors._noise.candidates``), so "touched by noise"
    proves no component innocent."""
    names = {problem.ground_truth.component, *problem.noise.exclude}
    names |= {f.target.name for f in problem.faults if f.target.name}
    return sorted(n for n in names if n)


def cured_by_restart(problem: Problem) -> list[str]:
    """Root-cause components a restart would cure, which noise that restarts pods spares: all of
    them where the ground truth says a restart cures the problem (``restart_cures``; its faults are
    not re-applied), else the targets of faults a restart ends early (a paused process: a stall
    that starts a retry storm, cut short, might start none). Every other fault outlives its pod, so
    a noise restart of its component leaves it in place, as ``sregym validate``'s restart step checks."""
    if problem.ground_truth.restart_cures:
        return noise_exclusions(problem)
    ended = set()
    for f in problem.faults:
        cls = INJECTORS.get(f.injector)
        if f.target.name and cls.ended_by_restart(cls.parse_params(f.params, where=f"{f.id}.params")):
            ended.add(f.target.name)
    return sorted(ended)


def unwrap(error: BaseException) -> BaseException:
    """The one error inside (nested) single-member exception groups, so it keeps its exit code."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


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


def versions(cluster: ClusterHandle) -> Versions:
    v = Versions(sregym=sregym.__version__, provider=cluster.provider, python=platform.python_version())
    try:
        v.kubernetes = cluster.kube.server_version()
    except SregymError:
        pass
    v.helm = helm_version()
    return v


@functools.lru_cache(maxsize=1)
def helm_version() -> str | None:
    """``helm version --short``, asked once a process (every episode's record names it)."""
    try:
        out = subprocess.run([helm_path(), "version", "--short"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip() or None
    except (SregymError, OSError, subprocess.SubprocessError):
        return None


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


class Episode:
    """One (problem, seed, noise) episode on ``cluster``; see the module docstring.

    ``agent_seconds`` is how long the timeline's noise is planned to play after the onset.
    ``record_to``: keep a run record (naming ``agent``, ``suite`` and the run's ``settings``) and
    write it there on leaving. ``plugin_dirs`` go into the journal so ``sregym cleanup`` can rebuild plug-in
    injectors after a crash."""

    def __init__(self, problem: Problem, *, cluster: ClusterHandle, seed: int, noise: bool,
                 agent_seconds: float, driver: AppDriver | None = None, console: Console | None = None,
                 verify_timeout: float = 90.0, journal_dir: Path | None = None,
                 plugin_dirs: Sequence[Path] = (), kind: str = "r", record_to: Path | None = None,
                 agent: AgentInfo | None = None, suite: str | None = None, settings: RunSettings | None = None):
        self.problem, self.cluster, self.seed, self.noise = problem, cluster, seed, noise
        self.driver = driver or app_driver()
        self.verify_timeout = verify_timeout
        self.plugin_dirs = list(plugin_dirs)
        self.run_id = new_run_id(kind)
        self.phases = Phases(console, label=problem.id)
        self.journal = Journal(self.run_id, journal_dir)
        self.timeline = resolve_timeline(problem, seed, noise, agent_seconds=agent_seconds)
        self.app: DeployedApp | None = None
        self.baseline: dict[str, Any] = {}
        self.plane: FaultPlane | None = None
        self.player: TimelinePlayer | None = None
        self.record_to = record_to
        self.record: RunRecord | None = None
        if record_to is not None:
            self.record = RunRecord(
                run_id=self.run_id, problem_id=problem.id, spec_hash=problem.spec_hash(), suite=suite,
                app=problem.app.name, namespace=problem.app.namespace or "", agent=agent or AgentInfo(name="?"),
                seed=seed, noise=noise, settings=settings, difficulty=problem.difficulty.value,
                tags=problem.tags.model_dump(mode="json"), versions=versions(cluster), timeline=self.timeline)
        self._before_agent: agent_objects.Snapshot | None = None
        self._recovered = False
        self._journal_started = False

    # -- before any change -------------------------------------------------------------------------
    async def endpoints(self) -> DeployedApp | None:
        """The app's namespace (made) and the observability stack's URLs, before its release is
        checked, so the agent plane can open alongside :meth:`deploy`; None when the driver cannot
        tell them first (one without ``endpoints``): the plane then waits for :meth:`deploy`."""
        early = getattr(self.driver, "endpoints", None)
        if early is None:
            return None
        return await anyio.to_thread.run_sync(early, self.problem.app, self.cluster, self.phases.note)

    async def deploy(self) -> DeployedApp:
        """Deploy the app (or reuse it) and make sure the hidden namespace exists."""
        self.app = await anyio.to_thread.run_sync(self.driver.deploy, self.problem.app, self.cluster, self.phases.note)
        if self.record is not None:
            self.record.namespace = self.app.namespace
        await anyio.to_thread.run_sync(ensure_hidden_namespace, self.cluster.kube)
        return self.app

    async def healthy(self, timeout: float = 0.0) -> tuple[bool, str]:
        """The app's health, polled until healthy or ``timeout`` s passed: (ok, detail)."""
        deadline = time.monotonic() + timeout
        while True:
            ok, detail = await anyio.to_thread.run_sync(self.driver.health, self.app, self.cluster)
            if ok or time.monotonic() >= deadline:
                return ok, detail
            await anyio.sleep(3)

    async def measure_baseline(self, window: float, *, require_healthy: bool = False) -> dict[str, Any]:
        """SLOs over ``window`` s before any fault; ``require_healthy`` refuses an unhealthy app first.
        With the fault plane open, the data stores' volume layers are served first: the baseline is
        measured through them, and a fault on their files then mounts nothing new (no tell)."""
        assert self.app is not None, "deploy() first"
        if self.plane is not None and not self.plane.layers():
            await self.serve_volumes()
        if require_healthy:
            # a moment to settle: the volume layer just served, or the last run's recovery restarted
            # pods (CI: a run right after another failed its baseline in 0.3 s, then passed on rerun)
            ok, detail = await self.healthy(HEALTHY_BEFORE_BASELINE_S)
            if not ok:
                raise ClusterError(f"app {self.problem.app.name} is not healthy before injection: {detail}",
                                   hint=f"kubectl -n {self.app.namespace} get pods")
        self.baseline = await baseline_meeting_objectives(self.driver, self.app, self.cluster, window,
                                                          within_s=BASELINE_MET_WITHIN_S, note=self.phases.note)
        if self.record is not None:
            self.record.baseline = self.baseline
        return self.baseline

    # -- changes ---------------------------------------------------------------------------------
    def open_fault_plane(self) -> TimelinePlayer:
        """Start the journal (before the first change) and open the fault plane and its timeline
        player; nothing changes yet."""
        assert self.app is not None, "deploy() first"
        problem, app = self.problem, self.app
        self.start_journal()
        self.plane = FaultPlane(journal=self.journal, kube=self.cluster.kube, app_namespace=app.namespace,
                                run_id=self.run_id, run_seed=self.seed, exclude=noise_exclusions(problem),
                                cured_by_restart=cured_by_restart(problem),
                                reapply=not problem.ground_truth.restart_cures)
        self.player = TimelinePlayer(self.plane, problem.faults, self.timeline, verify_timeout=self.verify_timeout,
                                     noise_params={"duration": problem.noise.duration_seconds,
                                                   "exclude": sorted(problem.noise.exclude)}, note=self.phases.note)
        return self.player

    def start_journal(self) -> None:
        """Start the journal (once): before the first change, and before the agent plane's helper
        processes and sandbox, which it records as they start."""
        if self._journal_started:
            return
        self.journal.start(RunHeader(run_id=self.run_id, problem_id=self.problem.id,
                                     kubeconfig=str(self.cluster.kubeconfig), context=self.cluster.context,
                                     plugins=[str(p.resolve()) for p in self.plugin_dirs]))
        self._journal_started = True

    async def serve_volumes(self) -> list[str]:
        """The data stores' volume layers (``faultplane.serve_volumes``), in every run of the app
        whatever its faults; ``measure_baseline`` starts them."""
        assert self.plane is not None and self.app is not None, "open_fault_plane() first"
        served = await serve_volumes(self.plane, self.app.info)
        if served:
            self.phases.note(f"volume layer: {', '.join(served)}")
        return served

    async def inject(self, until: float | None = None) -> TimelinePlayer:
        """Play the timeline up to ``until`` (default: the incident onset), each fault verified,
        opening the fault plane first if it is not open. The rest is ``player.play_rest``'s."""
        player = self.player or self.open_fault_plane()
        await player.play_until(incident_onset(self.timeline) if until is None else until)
        return player

    async def watch_agent_objects(self) -> None:
        """What is in the app namespace now: whatever appears by the end is the agent's, removed
        on leaving (journaled, so a killed run's cleanup removes it too)."""
        assert self.app is not None, "deploy() first"
        self._before_agent = await anyio.to_thread.run_sync(agent_objects.snapshot, self.cluster, self.app.namespace)
        self.journal.before_agent(self.app.name, self._before_agent.to_dict())

    async def stop_noise(self) -> list[str]:
        """Recover the noise still playing (before grading); the errors are noted and returned."""
        errors = await self.player.stop_noise() if self.player else []
        for err in errors:
            self.phases.note(f"noise recover failed: {err}")
        return errors

    async def recover(self) -> list[str]:
        """Recover every fault and noise event still active, newest first; returns the errors."""
        if self.plane is None:
            return []
        errors = await self.plane.recover_all()
        self._recovered = not errors
        return errors

    # -- leaving ---------------------------------------------------------------------------------
    async def __aenter__(self) -> Episode:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool:
        failure = unwrap(exc) if exc is not None else None
        if failure is not None and self.record is not None:
            aborted = isinstance(failure, (KeyboardInterrupt, anyio.get_cancelled_exc_class()))
            self.record.status = "aborted" if aborted else "error"
            self.record.error = "interrupted" if aborted else str(failure)
        with anyio.CancelScope(shield=True):
            recovered = await self._recover_left()
            left_none = await self._tear_down_agent_objects()  # also when a fault did not come off
            if recovered and left_none and self._journal_started:
                # closed only now: a kill before this point leaves the journal open, so `sregym
                # cleanup` finds the faults and what the agent made (its journaled snapshot)
                self.journal.close()
            if self.record is not None:
                self._write_record()
        if failure is not None and failure is not exc:
            raise failure from None
        return False

    async def _recover_left(self) -> bool:
        """Recover what is still active (shown as the recover phase unless the script already
        recovered everything); whether every fault came off."""
        if self.plane is None:  # no fault was injected: nothing to recover (the journal may hold the
            return True         # agent plane's processes and sandbox, which closed before this)
        if self._recovered:
            return True
        with self.phases.phase("recover"):
            errors = await self.recover()
            if errors:
                if self.record is not None:
                    self.record.status = "error"
                    self.record.error = "; ".join([*filter(None, [self.record.error]), *errors])
                self.phases.note(f"some faults were not recovered ({'; '.join(errors)}); run `sregym cleanup`")
                return False
            if self.app is not None:
                ok, detail = await self.healthy()
                if not ok:
                    self.phases.note(f"after recovery the app is not healthy yet: {detail}")
        return True

    async def _tear_down_agent_objects(self) -> bool:
        """Delete what the agent created (recorded); whether nothing it created is left."""
        if self._before_agent is None or self.app is None:
            return True
        try:
            objects = await anyio.to_thread.run_sync(agent_objects.teardown, self.cluster, self._before_agent,
                                                     self.app.name)
        except SregymError as e:
            self.phases.note(f"could not tear down what the agent made: {e}")
            return False  # the journal stays open: `sregym cleanup` tries again
        for obj in objects:
            self.phases.note(f"agent {obj.change} {obj.resource}/{obj.name}"
                             + (" (removed)" if obj.removed else f": {obj.error}" if obj.error else ""))
        if self.record is not None:
            self.record.agent_objects = objects
        if any(o.change == "created" and not o.removed for o in objects):
            self.phases.note("some objects the agent made were not removed; run `sregym cleanup`")
            return False
        return True

    def _write_record(self) -> None:
        record, plane = self.record, self.plane
        assert record is not None and self.record_to is not None
        record.phases = self.phases.durations
        record.phase_starts = self.phases.starts
        record.mechanisms = plane.mechanisms() if plane else {}
        record.reapplied = list(plane.reapplied) if plane else []
        record.ended_at = datetime.now(timezone.utc)
        diag, mit = record.trajectory.submission("diagnosis"), record.trajectory.submission("mitigation")
        record.ttd_s = diag.t if diag else None
        record.ttm_s = mit.t if mit else None
        self.phases.note(f"record: {write_record(record, self.record_to)}")
