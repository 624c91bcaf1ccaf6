"""Helper processes that must not outlive the sregym process that started them (its port-forwards),
recorded where ``sregym cleanup`` finds them when that process was killed.

A process is started, then recorded at once (before anything waits on it) in a file of its owner,
``$SREGYM_STATE/processes/<owner pid>-<owner start time>.jsonl``: each line fsync'd, each process
named by its identity: pid, start time (``/proc/<pid>/stat`` field 22) and command line. Stopping it
normally appends ``stopped`` (the file goes when nothing in it runs). These processes belong to the
sregym process, not to one run: a suite's runs share them, and a command that is no run
(``sregym observability status``) opens them too, so they are kept beside the run journals, not in one.

``sregym cleanup`` (:func:`stop_orphans`) reads the files of owners that are gone (no process has
that pid with that start time) and stops each recorded process that is still itself: same pid,
start time and command line, through a pidfd taken before the check, so a pid the kernel has given
to another process since is never signalled. Then the file goes; a second cleanup finds nothing.
:func:`stop` is the one way a process that must not outlive its owner is stopped: a killed run's
journaled helpers (``sregym.conductor.cleanup``) go through it too, each with its process group.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

from sregym.cluster.local.paths import private_append_line, state_root
from sregym.cluster.scratch import process_start_time
from sregym.core.errors import PrerequisiteError

STOP_WAIT_S = 5.0
PIDFD_SIGNAL_PROCESS_GROUP = 4  # linux/pidfd.h, kernel 6.9
_lock = threading.Lock()


def records_dir() -> Path:
    return state_root() / "processes"


@dataclass(frozen=True)
class ProcessIdentity:
    """What tells one process from a later one with the same pid."""

    pid: int
    start: str | None  # clock ticks since boot; None where there is no /proc (never matched then)
    cmdline: tuple[str, ...]

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity | None:
        """The running process ``pid`` (not a zombie: it has exited), or None."""
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, IndexError):
            return None
        if state in ("Z", "X"):
            return None
        return cls(pid, process_start_time(pid), tuple(x.decode(errors="replace") for x in raw.split(b"\0")[:-1]))

    def is_running(self) -> bool:
        """True while this very process runs (a recycled pid has another start time)."""
        return self.start is not None and ProcessIdentity.of(self.pid) == self

    def started_by(self, when: float) -> bool:
        """Whether it started no later than ``when`` (seconds since the epoch), give or take the boot
        time's one-second grain: a process that had its pid before it was recorded is not this one."""
        try:
            boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                        if line.startswith("btime "))
            return self.start is not None and boot + int(self.start) / os.sysconf("SC_CLK_TCK") <= when + 2
        except (OSError, StopIteration, ValueError, IndexError):
            return False


def _owner_file(directory: Path | None = None) -> Path:
    pid = os.getpid()
    return (directory or records_dir()) / f"{pid}-{process_start_time(pid)}.jsonl"


def _append(path: Path, entry: dict) -> None:
    private_append_line(path, json.dumps(entry))


@dataclass(frozen=True)
class Recorded:
    identity: ProcessIdentity
    what: str


def _read(path: Path) -> list[Recorded]:
    """The processes a file records as started and not stopped, in order; a torn line is skipped."""
    started: dict[tuple[int, str | None], Recorded] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
            key = (int(e["pid"]), e.get("start"))
            if e["op"] == "started":
                started[key] = Recorded(ProcessIdentity(key[0], key[1], tuple(map(str, e["cmdline"]))), str(e["what"]))
            elif e["op"] == "stopped":
                started.pop(key, None)
        except (ValueError, KeyError, TypeError):
            continue
    return list(started.values())


def record(pid: int, what: str, *, directory: Path | None = None) -> ProcessIdentity:
    """Record the process ``pid`` this process just started (``what`` names it for a person) so
    cleanup can stop it if this process is killed. PrerequisiteError when the state folder cannot be
    written: a process nobody could stop after a crash is not started (the caller stops it)."""
    identity = ProcessIdentity.of(pid) or ProcessIdentity(pid, process_start_time(pid), ())
    path = _owner_file(directory)
    try:
        with _lock:
            _append(path, {"op": "started", "pid": pid, "start": identity.start, "cmdline": list(identity.cmdline),
                           "what": what})
    except OSError as e:
        raise PrerequisiteError(f"cannot record the helper process {what} in {path}: {e}",
                                hint="set SREGYM_STATE to a writable folder") from None
    return identity


def forget(identity: ProcessIdentity, *, directory: Path | None = None) -> None:
    """The process was stopped by its owner: no cleanup needed. The file goes once nothing in it runs."""
    path = _owner_file(directory)
    with _lock:
        try:
            _append(path, {"op": "stopped", "pid": identity.pid, "start": identity.start})
            if not _read(path):
                path.unlink(missing_ok=True)
        except OSError:
            pass  # recorded as running: cleanup finds it gone (or not itself) and only drops the file


def _process_group(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _exited(fd: int, wait_s: float) -> bool:
    return bool(select.select([fd], [], [], wait_s)[0])  # a pidfd is readable once its process has exited


def _signal_group(fd: int, pgid: int, sig: int) -> None:
    """Signal the process group the pidfd's process leads. The kernel (>= 6.9) resolves the group from
    the pidfd itself, so it is that very process's group even if the pid has passed to another since.
    An older kernel: the leader is held stopped first (it cannot exit by itself, so its pid, the
    group's id, stays its own) and the group is signalled by id while the leader still lives."""
    try:
        signal.pidfd_send_signal(fd, sig, None, PIDFD_SIGNAL_PROCESS_GROUP)
        return
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
    signal.pidfd_send_signal(fd, signal.SIGSTOP)
    if _exited(fd, 0):
        raise ProcessLookupError(pgid)
    os.killpg(pgid, sig)


def stop(identity: ProcessIdentity, *, group: bool = False) -> bool:
    """Stop the process if it is still ``identity``; True when this call stopped it (False: it was gone
    already, another process has its pid now, or it may not be signalled). Every signal goes through a
    pidfd taken before the check (a group's too, :func:`_signal_group`), so a pid the kernel gives to
    another process meanwhile is never signalled. ``group``: the process leads its own group (started with ``start_new_session``) and
    the whole group is killed at once, its children too; otherwise SIGTERM, then SIGKILL."""
    try:
        fd = os.pidfd_open(identity.pid)  # holds this very process: a later one with its pid is another
    except (ProcessLookupError, AttributeError, OSError):
        return False
    try:
        if not identity.is_running():
            return False
        leads = group and _process_group(identity.pid) == identity.pid
        signals = [signal.SIGKILL] if leads else [signal.SIGTERM, signal.SIGKILL]
        for n, sig in enumerate(signals):
            try:
                if leads:
                    _signal_group(fd, identity.pid, sig)
                else:
                    signal.pidfd_send_signal(fd, sig)
            except ProcessLookupError:
                return n > 0  # gone before the first signal: not stopped by us
            except PermissionError:  # another user's process: reported as not stopped
                return False
            if _exited(fd, STOP_WAIT_S):
                return True
        return False
    finally:
        os.close(fd)


def owner_alive(path: Path) -> bool:
    """Whether the process a record file belongs to still runs (its name: ``<pid>-<start time>``)."""
    pid, _, start = path.stem.partition("-")
    try:
        return process_start_time(int(pid)) == start
    except ValueError:
        return True  # not a name this module makes: not ours to judge


def stop_orphans(directory: Path | None = None) -> tuple[list[str], list[str]]:
    """Stop the recorded processes of owners that are gone, each only while it is still the process
    recorded, and drop their files. Returns (what was stopped, errors); idempotent."""
    d = directory or records_dir()
    stopped: list[str] = []
    errors: list[str] = []
    for path in sorted(d.glob("*.jsonl")) if d.is_dir() else []:
        if owner_alive(path):
            continue
        try:
            recorded = _read(path)
        except OSError as e:
            errors.append(f"reading {path}: {e}")
            continue
        left = []
        for r in recorded:
            if stop(r.identity):
                stopped.append(f"{r.what} (pid {r.identity.pid})")
            elif r.identity.is_running():
                left.append(r)
                errors.append(f"{r.what} (pid {r.identity.pid}) did not stop")
        if not left:
            path.unlink(missing_ok=True)
    return stopped, errors
