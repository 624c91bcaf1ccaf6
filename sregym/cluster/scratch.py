"""Private scratch folders of the agent's helper processes (the API proxy's, the tool server's) in the
system's temp folder, and the sweep that removes those a killed run left behind.

A folder made here holds a marker naming the process that owns it: its pid and that process's start
time, so a pid the kernel gave to another process since does not count as the owner. ``sregym
cleanup`` removes a folder only when

1. it is a real folder (not a symlink) of this user, named with one of :data:`PREFIXES`;
2. its owner is gone; a folder without a marker (made by an older sregym, or caught between its
   creation and its marker) counts as gone only once it is older than :data:`UNMARKED_GRACE_SECONDS`;
3. no live process works in it: none has its working directory, root or an open file inside. A
   proxy or tool server whose conductor was killed still works there until cleanup stops it, and a
   live run's folders are never pulled from under it, whoever made them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

PREFIXES = ("sregym-agentproxy-", "sre-tools-")
MARKER = ".sregym-owner"
# A folder without a marker was made before markers existed; its owner cannot be known. No run lives
# this long (its budgets are minutes), and a process working in one keeps it anyway (rule 3).
UNMARKED_GRACE_SECONDS = 3 * 3600.0


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None
    when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may contain spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def make_scratch_dir(prefix: str) -> Path:
    """A private (0700) folder in the temp folder, marked as this process's."""
    assert prefix.startswith(PREFIXES), f"{prefix!r}: the sweep would not know this folder"
    path = Path(tempfile.mkdtemp(prefix=prefix))
    (path / MARKER).write_text(f"{os.getpid()} {process_start_time(os.getpid())}\n")
    return path


def _owner_alive(folder: Path, now: float) -> bool:
    try:
        pid, started = (folder / MARKER).read_text().split()
        return process_start_time(int(pid)) == started
    except FileNotFoundError:
        return now - folder.stat().st_mtime < UNMARKED_GRACE_SECONDS
    except (OSError, ValueError):  # unreadable or malformed: not ours to judge, keep it
        return True


def _folders_in_use(proc: Path = Path("/proc")) -> set[str]:
    """Every path a live process has as working directory, root or open file."""
    used: set[str] = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        links = [entry / "cwd", entry / "root"]
        try:
            links += list((entry / "fd").iterdir())
        except OSError:
            pass
        for link in links:
            try:
                used.add(os.readlink(link))
            except OSError:
                continue
    return used


def _used(folder: Path, in_use: set[str]) -> bool:
    prefix = str(folder) + "/"
    return any(p == str(folder) or p.startswith(prefix) for p in in_use)


def sweep_stale_scratch(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders whose owner is gone and that no live process uses; return them."""
    root = Path(root or tempfile.gettempdir())
    now, uid = time.time(), os.getuid()
    candidates = []
    for folder in root.iterdir():
        if not folder.name.startswith(PREFIXES):
            continue
        try:
            st = folder.lstat()
        except OSError:
            continue
        if not os.path.isdir(folder) or folder.is_symlink() or st.st_uid != uid:
            continue
        if not _owner_alive(folder, now):
            candidates.append(folder)
    if not candidates:
        return []
    in_use = _folders_in_use()
    removed = []
    for folder in candidates:
        if _used(folder, in_use):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
    return removed
