"""The journal: an append-only, fsync'd JSONL file per run, written before each change.

For each fault or noise action the conductor appends ``intent`` (everything ``recover`` needs:
injector name, parameters, target, mechanism, the state ``Injector.plan()`` returned, namespaces,
kubeconfig) *before* ``inject()``, then ``applied``, then ``recovered``. A run that dies at any
point leaves a file whose open entries (an intent without a ``recovered``) tell ``sregym cleanup``
exactly what to undo. Before the agent starts, ``before_agent`` holds the app namespace as it was
then, so cleanup can also remove what the agent made. Files live in ``$SREGYM_STATE/journal``
(default ``/var/lib/sregym/journal``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from sregym.cluster.local.paths import private_append_line, private_dir
from sregym.cluster.owned_processes import ProcessIdentity
from sregym.cluster.scratch import process_start_time
from sregym.core.errors import PrerequisiteError

Op = Literal["run", "intent", "applied", "recovered", "recover_failed", "process", "sandbox", "before_agent",
             "closed"]


def journal_dir() -> Path:
    return Path(os.environ.get("SREGYM_STATE", "/var/lib/sregym")) / "journal"


class Intent(BaseModel):
    """What is about to change, with all that is needed to undo it in another process."""

    key: str = Field(..., description="unique inside the run: fault id, or noise event name")
    kind: Literal["fault", "noise", "layer"] = Field(..., description="layer: the volume layer of a data store")
    injector: str
    params: dict[str, Any] = Field(default_factory=dict)
    target: dict[str, Any] = Field(default_factory=dict)
    mechanism: str
    state: dict[str, Any] = Field(default_factory=dict)
    app_namespace: str
    hidden_namespace: str
    seed: int = 0
    extras: dict[str, Any] = Field(default_factory=dict, description="the FaultContext fields the journal keeps "
                                   "(FaultContext.journal_fields: run_id, labels, exclude, node, only_pods)")


class RunHeader(BaseModel):
    run_id: str
    problem_id: str
    kubeconfig: str | None = None
    context: str | None = None
    plugins: list[str] = Field(default_factory=list, description="--plugins folders cleanup must import")
    pid: int = Field(default_factory=os.getpid)
    pid_start: str | None = Field(None, description="the run's process's start time (clock ticks since boot): a "
                                                    "later process with a recycled pid is not the run; None in "
                                                    "journals of older sregym versions")

    @model_validator(mode="before")
    @classmethod
    def _this_process(cls, data: Any) -> Any:
        """A header made without a pid is this process's: its start time is taken with it."""
        if isinstance(data, dict) and "pid" not in data and "pid_start" not in data:
            data = {**data, "pid": os.getpid(), "pid_start": process_start_time(os.getpid())}
        return data


class BeforeAgent(BaseModel):
    """The app namespace just before the agent started and the app's release: what the agent made
    since is what is there later and in neither."""

    release: str
    snapshot: dict[str, Any] = Field(..., description="sregym.conductor.agent_objects.Snapshot.to_dict()")


class Entry(BaseModel):
    op: Op
    run_id: str
    t: float = Field(default_factory=time.time)
    key: str | None = None
    intent: Intent | None = None
    header: RunHeader | None = None
    error: str | None = None
    pid: int | None = Field(None, description="op 'process': a helper process the run started")
    start: str | None = Field(None, description="op 'process': its start time (/proc/<pid>/stat field 22), "
                              "so a later process with its pid is told apart")
    cmdline: list[str] | None = Field(None, description="op 'process': its command line, with pid and start "
                                      "the identity cleanup stops it by (none in an older sregym's journal)")
    before_agent: BeforeAgent | None = None


class Journal:
    """Appends entries for one run; every line is flushed and fsync'd before the call returns."""

    def __init__(self, run_id: str, directory: Path | None = None):
        self.run_id = run_id
        self.dir = directory or journal_dir()
        self.path = self.dir / f"{run_id}.jsonl"

    def _append(self, entry: Entry) -> None:
        try:
            private_append_line(self.path, entry.model_dump_json(exclude_none=True))
        except OSError as e:
            raise PrerequisiteError(f"cannot write the journal {self.path}: {e}",
                                    hint="set SREGYM_STATE to a writable folder") from None

    def start(self, header: RunHeader) -> None:
        self._append(Entry(op="run", run_id=self.run_id, header=header))

    def intent(self, intent: Intent) -> None:
        self._append(Entry(op="intent", run_id=self.run_id, key=intent.key, intent=intent))

    def applied(self, key: str) -> None:
        self._append(Entry(op="applied", run_id=self.run_id, key=key))

    def recovered(self, key: str) -> None:
        self._append(Entry(op="recovered", run_id=self.run_id, key=key))

    def recover_failed(self, key: str, error: str) -> None:
        self._append(Entry(op="recover_failed", run_id=self.run_id, key=key, error=error))

    def process(self, pid: int, what: str) -> None:
        """A helper process (its own process group) that must not outlive the run, e.g. the agent's
        tool server: cleanup stops it and its group if the run was killed, only while it is the process
        recorded here, by pid, start time and command line (a pid the kernel gave to another process
        since is not it)."""
        identity = ProcessIdentity.of(pid)
        self._append(Entry(op="process", run_id=self.run_id, key=what, pid=pid,
                           start=identity.start if identity else process_start_time(pid),
                           cmdline=list(identity.cmdline) if identity else None))

    def sandbox(self, namespace: str) -> None:
        """The agent's sandbox namespace, written before it is created: cleanup deletes it (and every
        agent pod in it) if the run was killed."""
        self._append(Entry(op="sandbox", run_id=self.run_id, key=namespace))

    def before_agent(self, release: str, snapshot: dict[str, Any]) -> None:
        """The app namespace before the agent starts (``Snapshot.to_dict``): if the run is killed,
        cleanup deletes what the agent created since, after the agent is stopped."""
        self._append(Entry(op="before_agent", run_id=self.run_id,
                           before_agent=BeforeAgent(release=release, snapshot=snapshot)))

    def close(self) -> None:
        """Mark the run clean and move its file to ``closed/`` so cleanup no longer scans it."""
        self._append(Entry(op="closed", run_id=self.run_id))
        archive = private_dir(self.dir / "closed")
        self.path.replace(archive / self.path.name)
        self.path = archive / self.path.name


@dataclass(frozen=True)
class JournaledProcess:
    """A helper process as the run journaled it. An older sregym journaled no command line (before
    that, no start time either): ``None`` where the entry has none."""

    pid: int
    what: str
    start: str | None = None
    cmdline: tuple[str, ...] | None = None
    journaled_at: float = 0.0  # when the entry was written, after the process started


@dataclass
class RunJournal:
    """One journal file read back: its header and the intents still open, in the order written."""

    path: Path
    run_id: str
    header: RunHeader | None = None
    intents: list[Intent] = field(default_factory=list)
    recovered: set[str] = field(default_factory=set)
    closed: bool = False
    corrupt_lines: int = 0
    helpers: dict[int, JournaledProcess] = field(default_factory=dict)  # by pid, the latest entry
    sandboxes: list[str] = field(default_factory=list)
    before_agent: BeforeAgent | None = None

    @property
    def open_intents(self) -> list[Intent]:
        return [i for i in self.intents if i.key not in self.recovered]

    @property
    def processes(self) -> dict[int, str]:
        """pid -> what each journaled helper process is."""
        return {pid: p.what for pid, p in self.helpers.items()}


def read_journal(path: Path) -> RunJournal:
    """Parse a journal; a torn last line (the process died mid-write) is counted, not fatal."""
    rj = RunJournal(path=path, run_id=path.stem)
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            e = Entry.model_validate_json(line)
        except ValueError:
            rj.corrupt_lines += 1
            continue
        if e.op == "run":
            rj.header = e.header
        elif e.op == "intent" and e.intent is not None:
            # A re-planned key (retry) replaces the earlier intent and reopens it.
            rj.intents = [i for i in rj.intents if i.key != e.intent.key] + [e.intent]
            rj.recovered.discard(e.intent.key)
        elif e.op == "recovered" and e.key:
            rj.recovered.add(e.key)
        elif e.op == "process" and e.pid:
            rj.helpers[e.pid] = JournaledProcess(e.pid, e.key or "", e.start or None,
                                                 None if e.cmdline is None else tuple(e.cmdline), e.t)
        elif e.op == "sandbox" and e.key and e.key not in rj.sandboxes:
            rj.sandboxes.append(e.key)
        elif e.op == "before_agent" and e.before_agent is not None:
            rj.before_agent = e.before_agent
        elif e.op == "closed":
            rj.closed = True
    return rj


def open_journals(directory: Path | None = None) -> list[RunJournal]:
    """Journals of runs not closed yet, oldest first."""
    d = directory or journal_dir()
    if not d.is_dir():
        return []
    found = [read_journal(p) for p in sorted(d.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)]
    return [rj for rj in found if not rj.closed]
