"""Suites: run every (problem, seed, noise) cell of a suite with one agent, resumably.

Each cell is one ``run_problem`` call; its record and a line of ``index.jsonl`` land in the suite's
results directory. ``--resume`` reads that index and runs only the cells without a finished line
(a killed suite leaves the cell it was running without one, so exactly that cell and the ones
after it run again). A run that fails is recorded as an error cell and the suite goes on; only a
missing prerequisite, an unknown name (the agent's), or several failures in a row (the cluster is
likely broken) stop it.

Where a cell runs is the run function's business: in this process (``run_problem``, the thread
executor) or as a Kubernetes Job (``suite_jobs.JobCellRunner``, ``--executor jobs``); the
scheduling below is the same for both.

``--parallel N`` runs up to N cells side by side when they do not conflict (see ``claims``): each
cell claims its app namespace, any other namespace its faults name, and the nodes of node-level
faults. A second cell of an app that is already running gets its own namespace
(``<namespace>-p<slot>``), so the same app can run twice at once.
"""

from __future__ import annotations

import functools
import inspect
import platform
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

import sregym
from sregym.conductor.agent import agent_class, agent_info
from sregym.conductor.checks import NOISE_PREFIX
from sregym.conductor.episode import INDEX_FILE, new_run_id, write_record
from sregym.core.errors import PrerequisiteError, UnknownNameError, UserInputError
from sregym.core.jsonlines import append_json_line, read_json_lines
from sregym.core.problem import Problem
from sregym.core.record import RunRecord, Versions
from sregym.core.settings import RunSettings
# Statuses after which a cell is done; an aborted (interrupted) run always runs again.
FINISHED = ("completed", "error")
ANY_NODE = "node:*"
T = TypeVar("T")

CellKey = tuple[str, str, int, bool]  # agent, problem id, seed, noise


@dataclass(frozen=True, eq=False)
class Cell:
    """One (problem, seed, noise) episode of one agent, with the run settings it is played with."""

    problem: str
    settings: RunSettings

    @property
    def agent(self) -> str:
        return self.settings.agent

    @property
    def seed(self) -> int:
        return self.settings.seed

    @property
    def noise(self) -> bool:
        return self.settings.noise

    @property
    def key(self) -> CellKey:
        return (self.agent, self.problem, self.seed, self.noise)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def label(self) -> str:
        return f"{self.problem} seed {self.seed} {'noise' if self.noise else 'quiet'}"


def suite_cells(problems: Iterable[str], settings: RunSettings, seeds: Iterable[int],
                noise: Iterable[bool]) -> list[Cell]:
    """Every cell, problem by problem (so a partial suite covers whole problems first); each holds
    the suite's ``settings`` with its own seed and noise."""
    seeds, noise = list(seeds), list(noise)
    return [Cell(p, settings.model_copy(update={"seed": s, "noise": n})) for p in problems for s in seeds
            for n in noise]


# -- the index: what has finished ------------------------------------------------------------------

Key = Hashable


def latest_by_key(entries: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], Key],
                  counts: Callable[[dict[str, Any]], bool] = lambda e: True) -> dict[Key, dict[str, Any]]:
    """The last entry of each key among those that ``counts`` (a later line supersedes an earlier one)."""
    return {key(e): e for e in entries if counts(e)}


@dataclass(frozen=True)
class ResumableIndex:
    """An append-only JSON-lines file with one line per finished piece of work, which a resumed run
    reads to skip what is done: the suite's ``index.jsonl`` and ``sregym validate --log``. A line
    a kill cut short is skipped; the latest line of a key decides whether it is done."""

    path: Path
    required: frozenset[str]
    key: Callable[[dict[str, Any]], Key]

    def entries(self) -> list[dict[str, Any]]:
        return read_json_lines(self.path, set(self.required))

    def append(self, entry: dict[str, Any]) -> None:
        append_json_line(self.path, entry)

    def pending(self, items: Sequence[T], key: Callable[[T], Key], done: Callable[[dict[str, Any]], bool],
                counts: Callable[[dict[str, Any]], bool] = lambda e: True) -> list[T]:
        """The ``items`` whose key has no latest line (among those that ``counts``) that ``done`` accepts."""
        latest = latest_by_key(self.entries(), self.key, counts)
        return [i for i in items if not ((e := latest.get(key(i))) is not None and done(e))]


def entry_key(entry: dict[str, Any]) -> CellKey:
    return (entry["agent"], entry["problem_id"], int(entry["seed"]), bool(entry["noise"]))


def suite_index(out_dir: Path) -> ResumableIndex:
    """The suite's ``index.jsonl`` in ``out_dir`` (its lines are written with each record)."""
    return ResumableIndex(out_dir / INDEX_FILE, frozenset({"agent", "problem_id", "seed", "noise", "status"}),
                          entry_key)


def read_index(out_dir: Path) -> list[dict[str, Any]]:
    """Lines of ``index.jsonl`` (a line a kill cut short is skipped)."""
    return suite_index(out_dir).entries()


def record_kept(out_dir: Path) -> Callable[[dict[str, Any]], bool]:
    """Whether an index line counts: a line whose record file is gone does not."""
    return lambda e: not e.get("record") or (out_dir / e["record"]).is_file()


def finished_statuses(retry_errors: bool) -> tuple[str, ...]:
    return ("completed",) if retry_errors else FINISHED


# -- conflicts between cells that would run side by side -------------------------------------------

def problem_namespace(problem: Problem) -> str:
    """The namespace a problem's app uses by default (its app name stands for the app's default)."""
    return problem.app.namespace or problem.app.name


def claims(problem: Problem, namespace: str, is_node_level: Callable[[str], bool], *,
           noise: bool = False) -> frozenset[str]:
    """What a run of ``problem`` in ``namespace`` holds exclusively while it runs.

    ``ns:<name>`` for its app namespace and any other namespace a fault targets; ``node:<name>``
    for each node a node-level fault targets, or ``node:*`` when the node is only known once the
    fault picks its target pod (such a cell conflicts with every other node-level cell). With
    ``noise``, node-level noise (a CPU burst on a seeded node) could land under a neighbour's
    grading window, so it claims ``node:*`` too.
    """
    held = {f"ns:{namespace}"}
    if noise and problem.noise.per_window and any(is_node_level(f"{NOISE_PREFIX}{t}") for t in problem.noise.types):
        held.add(ANY_NODE)
    for fault in problem.faults:
        t = fault.target
        if t.namespace and t.namespace != problem.app.namespace:
            held.add(f"ns:{t.namespace}")
        if t.kind == "Node" or is_node_level(fault.injector):
            node = t.node or (t.name if t.kind == "Node" else None)
            held.add(f"node:{node}" if node else ANY_NODE)
    return frozenset(held)


def conflict(a: frozenset[str], b: frozenset[str]) -> bool:
    """Two claim sets conflict when they share a claim, or one holds any node and the other a node."""
    if a & b:
        return True
    a_nodes = any(c.startswith("node:") for c in a)
    b_nodes = any(c.startswith("node:") for c in b)
    return (ANY_NODE in a and b_nodes) or (ANY_NODE in b and a_nodes)


def free_namespace(base: str, in_use: Iterable[str], slots: int) -> str | None:
    """``base`` if no running cell uses it, else the first free ``<base>-p<k>`` (None: all taken)."""
    used = set(in_use)
    for name in [base, *(f"{base}-p{k}" for k in range(1, slots))]:
        if name not in used:
            return name
    return None


def pick_runnable(pending: Sequence[frozenset[str]], running: Sequence[frozenset[str]], free: int) -> list[int]:
    """Indices of pending claim sets to start now, in order, conflicting with neither the running
    cells nor each other; at most ``free`` of them. The first pending cell always starts when
    nothing runs, so a suite never stalls."""
    chosen: list[int] = []
    held = list(running)
    for i, want in enumerate(pending):
        if len(chosen) >= free:
            break
        if not any(conflict(want, h) for h in held):
            chosen.append(i)
            held.append(want)
    return chosen


def default_node_level(injector: str) -> bool:
    """Whether a registered injector acts on a node (holds the node while it runs)."""
    from sregym.injectors import INJECTORS

    if injector not in INJECTORS:  # unknown names are refused by check_problem before a suite starts
        return False
    return bool(getattr(INJECTORS.get(injector), "node_level", False))


# -- running ---------------------------------------------------------------------------------------

RunFn = Callable[..., Any]  # run_problem(problem, settings, *, out_dir, cluster, suite) -> RunRecord


@dataclass
class SuiteSummary:
    planned: int
    skipped: int
    statuses: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ran(self) -> int:
        return sum(self.statuses.values())


def with_namespace(problem: Problem, namespace: str) -> Problem:
    """The problem with its app in ``namespace`` (unchanged when that is its default)."""
    if namespace == problem_namespace(problem):
        return problem
    return problem.model_copy(update={"app": problem.app.model_copy(update={"namespace": namespace})})


@dataclass
class Running:
    """A cell in flight: what it claims, where it runs, and the node leases it holds."""

    cell: Cell
    claims: frozenset[str]
    namespace: str
    indexed_before: int
    started: float
    leases: Any = None


class InlineExecutor:
    """An executor that runs each call at once in the calling thread (``--parallel 1``)."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except Exception as e:  # noqa: BLE001 - handed to the suite loop like a thread's error
            fut.set_exception(e)
        return fut

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def load_registries(agent: str) -> None:
    """Fill every plug-in registry in this thread before cells run side by side: a registry loads
    lazily on first use, and two threads racing into that first load can see it empty. Looking the
    agent up also refuses an unknown agent before any cell starts."""
    from sregym.injectors import INJECTORS
    from sregym.oracles import DIAGNOSIS_ORACLES, MITIGATION_ORACLES

    from sregym.agentplane.agents import AGENTS

    for registry in (INJECTORS, MITIGATION_ORACLES, DIAGNOSIS_ORACLES, AGENTS):
        registry.load()
    agent_class(agent)


def _default_run_fn() -> RunFn:
    from sregym.conductor.run import run_problem  # the engine's; tests pass their own

    return run_problem


def _error_record(problem: Problem, cell: Cell, suite: str, error: BaseException,
                  seconds: float) -> RunRecord:
    """The record of a cell whose run failed before the engine could write one."""
    now = datetime.now(timezone.utc)
    return RunRecord(
        run_id=new_run_id(),
        problem_id=problem.id, spec_hash=problem.spec_hash(), suite=suite, app=problem.app.name,
        namespace=problem_namespace(problem), agent=agent_info(cell.agent), seed=cell.seed, noise=cell.noise,
        settings=cell.settings,
        difficulty=problem.difficulty.value, tags=problem.tags.model_dump(mode="json"), ended_at=now,
        status="error", error=f"{type(error).__name__}: {error}", phases={"total": round(seconds, 3)},
        versions=Versions(sregym=sregym.__version__, python=platform.python_version()))


def eta_seconds(elapsed: float, done: int, total: int) -> float | None:
    """Time left if the remaining cells take as long as the finished ones did on average."""
    if done <= 0 or elapsed <= 0:
        return None
    return max(0.0, elapsed / done * (total - done))


class EtaColumn(ProgressColumn):
    """ETA from the mean time per finished cell. (rich's own estimate looks only at the last
    30 s of progress, and a cell takes minutes, so it would mostly show nothing.)"""

    def render(self, task: Task) -> Text:
        left = eta_seconds(task.elapsed or 0.0, int(task.completed), int(task.total or 0))
        if left is None:
            return Text("ETA -", style="progress.remaining")
        h, rem = divmod(int(left), 3600)
        return Text(f"ETA {h}:{rem // 60:02d}:{rem % 60:02d}", style="progress.remaining")


class SuiteRunner:
    """Runs the cells of one suite for one agent into ``out_dir`` (see the module docstring)."""

    def __init__(self, problems: Sequence[Problem], *, suite: str, settings: RunSettings, seeds: Sequence[int],
                 noise: Sequence[bool], out_dir: Path, cluster: Any = None, run_fn: RunFn | None = None,
                 parallel: int = 1, retry_errors: bool = False,
                 max_consecutive_errors: int = 3, console: Console | None = None,
                 is_node_level: Callable[[str], bool] = default_node_level, leases: Any = None,
                 lease_poll_s: float = 10.0):
        if parallel < 1:
            raise UserInputError("--parallel must be at least 1")
        self.problems = {p.id: p for p in problems}
        self.suite, self.out_dir, self.cluster = suite, Path(out_dir), cluster
        self.settings, self.agent = settings, settings.agent  # each cell plays these with its seed and noise
        self.cells = suite_cells(self.problems, settings, seeds, noise)
        self.run_fn = run_fn or _default_run_fn()
        self.parallel, self.retry_errors = parallel, retry_errors
        self.max_consecutive_errors = max_consecutive_errors
        self.console = console or Console(stderr=True)
        self.is_node_level = is_node_level
        self.leases = leases  # a node_leases.NodeLeases, or None (no other process shares the cluster)
        self.lease_poll_s = lease_poll_s

    def pending(self, *, resume: bool) -> list[Cell]:
        """Cells to run; without ``resume`` a results directory that has any of them is refused."""
        done = finished_statuses(self.retry_errors)
        todo = suite_index(self.out_dir).pending(self.cells, lambda c: c.key, lambda e: e["status"] in done,
                                                 record_kept(self.out_dir))
        if not resume and len(todo) < len(self.cells):
            raise UserInputError(
                f"{self.out_dir} already holds results of {len(self.cells) - len(todo)} of these "
                f"{len(self.cells)} runs", hint="add --resume to run only the missing ones, or choose another --out")
        return todo

    def _call(self, cell: Cell, namespace: str) -> RunRecord:
        problem = with_namespace(self.problems[cell.problem], namespace)
        call = functools.partial(self.run_fn, problem, cell.settings, out_dir=self.out_dir,
                                 cluster=self.cluster, suite=self.suite)
        if inspect.iscoroutinefunction(self.run_fn):
            import anyio

            return anyio.run(call)
        return call()

    def _indexed_runs(self, cell: Cell) -> int:
        return sum(entry_key(e) == cell.key for e in read_index(self.out_dir))

    def _finish(self, cell: Cell, outcome: RunRecord | BaseException, before: int, started: float,
                summary: SuiteSummary, namespace: str | None = None) -> BaseException | None:
        """Note one finished cell (run in ``namespace``); returns the error when it failed."""
        took = time.monotonic() - started
        if isinstance(outcome, BaseException):
            # the engine wrote no record, or one that does not say what ended it: write the error cell
            if self._indexed_runs(cell) == before or getattr(outcome, "supersedes_record", False):
                problem = self.problems[cell.problem]  # as it ran: in its slot namespace
                problem = with_namespace(problem, namespace) if namespace else problem
                write_record(_error_record(problem, cell, self.suite, outcome, took), self.out_dir)
            summary.statuses["error"] += 1
            summary.errors.append(f"{cell.label}: {outcome}")
            self.console.print(f"[red]✗[/] {escape(cell.label)}: error: {escape(str(outcome))} [dim]{took:.0f}s[/]")
            return outcome
        summary.statuses[outcome.status] += 1
        diag = {True: "pass", False: "fail", None: "not judged"}[outcome.diagnosis_passed]
        mit = {True: "pass", False: "fail", None: "-"}[outcome.mitigation_passed]
        self.console.print(f"[green]✓[/] {escape(cell.label)}: {outcome.status}, diagnosis {diag}, "
                           f"mitigation {mit} [dim]{took:.0f}s[/]")
        return None

    def run(self, *, resume: bool = False) -> SuiteSummary:
        """Run every pending cell; returns what ran. Raises on a prerequisite or input error, or
        after ``max_consecutive_errors`` failed runs in a row."""
        before_suite = getattr(self.run_fn, "before_suite", None)
        if before_suite is not None and resume:  # the jobs executor: a lost suite's Jobs end (and index) first
            before_suite(self.cluster, self.out_dir)
        todo = self.pending(resume=resume)
        if todo:  # whichever executor: an unknown agent is refused before any cell (or Job) starts
            load_registries(self.agent)
        summary = SuiteSummary(planned=len(self.cells), skipped=len(self.cells) - len(todo))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.leases is not None and todo:
            self.leases.ensure_namespace()
        if summary.skipped:
            self.console.print(f"resuming: {summary.skipped} of {len(self.cells)} runs already finished")
        started = time.monotonic()
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), EtaColumn())
        with Progress(*columns, console=self.console, transient=False) as progress:
            task = progress.add_task(f"suite {self.suite} / {self.agent}", total=len(todo))
            self._loop(todo, summary, progress, task)
        summary.seconds = time.monotonic() - started
        return summary

    def _loop(self, todo: list[Cell], summary: SuiteSummary, progress: Progress, task: Any) -> None:
        pending = list(todo)
        running: dict[Future, Running] = {}
        streak = 0
        # One at a time runs in this thread, so Ctrl-C reaches the run and it recovers as `sregym run` does.
        pool = InlineExecutor() if self.parallel == 1 else ThreadPoolExecutor(self.parallel, "suite-cell")
        with pool:
            while pending or running:
                self._start(pending, running, pool, progress, task)
                if not running:  # every pending cell waits for a node lease another process holds
                    time.sleep(self.lease_poll_s)
                    continue
                done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for fut in done:
                    run = running.pop(fut)
                    if run.leases is not None:
                        run.leases.release()
                    exc = fut.exception()
                    failed = self._finish(run.cell, exc if exc is not None else fut.result(), run.indexed_before,
                                          run.started, summary, run.namespace)
                    progress.advance(task)
                    streak = streak + 1 if failed else 0
                    # a missing tool or an unknown name (the agent's) fails every cell alike; other bad
                    # input (a target a problem does not find) belongs to its cell, like any failure
                    fatal = isinstance(failed, (PrerequisiteError, UnknownNameError))
                    if failed and (fatal or streak >= self.max_consecutive_errors):
                        pending.clear()  # let the cells already running finish (and recover), then stop
                        wait(list(running))
                        for other in running.values():
                            if other.leases is not None:
                                other.leases.release()
                        why = "nothing else can succeed" if fatal else f"{streak} runs in a row failed"
                        self.console.print(f"[red]stopping:[/] {why}; fix the cause and run again with "
                                           "--resume --retry-errors")
                        raise failed

    def _take_leases(self, cell: Cell, want: frozenset[str]) -> tuple[bool, Any]:
        """Node leases for a cell's node claims: (True, held or None) or (False, None) if taken."""
        nodes = [c.split(":", 1)[1] for c in want if c.startswith("node:")]
        if self.leases is None or not nodes:
            return True, None
        if "*" in nodes:
            nodes = self.leases.nodes()
        from sregym.conductor.node_leases import holder_identity

        held = self.leases.acquire_all(nodes, holder_identity(f"{self.suite}/{self.agent}/{cell.label}"))
        return held is not None, held

    def _start(self, pending: list[Cell], running: dict[Future, Running], pool: Any, progress: Progress,
               task: Any) -> None:
        """Start as many pending cells as free slots, conflicts and node leases allow. Rounds repeat
        because a cell started in one round frees the next slot namespace for another of its app."""
        while self._start_round(pending, running, pool, progress, task):
            pass

    def _start_round(self, pending: list[Cell], running: dict[Future, Running], pool: Any, progress: Progress,
                     task: Any) -> int:
        free = self.parallel - len(running)
        if free <= 0 or not pending:
            return 0
        held = [r.claims for r in running.values()]
        used_ns = [r.namespace for r in running.values()]
        options: list[tuple[int, frozenset[str], str]] = []
        for i, cell in enumerate(pending):
            problem = self.problems[cell.problem]
            ns = free_namespace(problem_namespace(problem), used_ns, self.parallel)
            if ns is not None:
                options.append((i, claims(problem, ns, self.is_node_level, noise=cell.noise), ns))
        started: list[int] = []
        for j in pick_runnable([o[1] for o in options], held, free):
            i, want, ns = options[j]
            cell = pending[i]
            ok, leases = self._take_leases(cell, want)
            if not ok:
                progress.update(task, description=f"suite {self.suite} / {self.agent}: {cell.label} waits for a "
                                "node another sregym process holds")
                continue
            labels = [r.cell.label for r in running.values()] + [cell.label]
            progress.update(task, description=f"suite {self.suite} / {self.agent}: {', '.join(labels)}")
            run = Running(cell, want, ns, self._indexed_runs(cell), time.monotonic(), leases)
            try:
                running[pool.submit(self._call, cell, ns)] = run
            except BaseException:  # Ctrl-C inside an inline run: give the leases back before leaving
                if leases is not None:
                    leases.release()
                raise
            used_ns.append(ns)
            started.append(i)
        for i in sorted(started, reverse=True):
            del pending[i]
        return len(started)
