"""The scratch folders of the agent's helper processes, and the sweep `sregym cleanup` runs over them:
a killed run's folders go, a live run's stay (sregym/cluster/scratch.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sregym.cluster import scratch


def folder(root: Path, name: str, owner: str | None) -> Path:
    path = root / name
    path.mkdir(mode=0o700)
    (path / "agentproxy.log").write_text("a log line\n")
    if owner is not None:
        (path / scratch.MARKER).write_text(owner + "\n")
    return path


def dead_owner() -> str:
    """The marker of a process that has exited."""
    proc = subprocess.Popen(["true"])
    started = scratch.process_start_time(proc.pid)
    proc.wait()
    return f"{proc.pid} {started or '1'}"


def this_process() -> str:
    return f"{os.getpid()} {scratch.process_start_time(os.getpid())}"


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_killed_runs_folders_are_removed_and_a_live_runs_are_kept(tmp_path) -> None:
    killed = [folder(tmp_path, "sregym-agentproxy-dead1", dead_owner()),
              folder(tmp_path, "sre-tools-dead2", dead_owner()),
              folder(tmp_path, "sre-tools-home-dead3", dead_owner())]
    live = [folder(tmp_path, "sregym-agentproxy-live1", this_process()),
            folder(tmp_path, "sre-tools-live2", this_process())]
    assert sorted(scratch.sweep_stale_scratch(tmp_path)) == sorted(killed)
    assert all(not p.exists() for p in killed) and all(p.exists() for p in live)
    assert scratch.sweep_stale_scratch(tmp_path) == []  # idempotent


def test_a_reused_pid_is_not_the_owner(tmp_path) -> None:
    """The marker names the pid and its start time: the same pid with another start time is another
    process, so the owner is gone."""
    reused = folder(tmp_path, "sre-tools-reused", f"{os.getpid()} 1")
    assert scratch.sweep_stale_scratch(tmp_path) == [reused]


def holds(pid: int, folder: Path) -> bool:
    """Whether the process has a file under the folder open. Its interpreter opens and closes files
    while starting, so an fd listed may be gone before it is read."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(folder)):
                return True
        except FileNotFoundError:
            continue
    return False


def test_a_folder_a_live_process_works_in_is_kept_though_its_owner_is_gone(tmp_path) -> None:
    """A proxy whose conductor was killed still runs in its folder until cleanup stops it; the sweep
    never pulls a folder from under a live process (working directory or open file)."""
    cwd = folder(tmp_path, "sregym-agentproxy-orphan", dead_owner())
    held = folder(tmp_path, "sre-tools-held", dead_owner())
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); time.sleep(60)",
                                str(held / "agentproxy.log")], cwd=cwd)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not holds(sleeper.pid, held):
            time.sleep(0.05)
        assert holds(sleeper.pid, held), f"the sleeper never opened a file under {held}"
        assert scratch.sweep_stale_scratch(tmp_path) == []
        assert cwd.exists() and held.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sorted(scratch.sweep_stale_scratch(tmp_path)) == sorted([cwd, held])


def test_a_folder_without_a_marker_goes_only_when_old(tmp_path) -> None:
    """Folders of an older sregym have no marker; a fresh one may be a folder caught between its
    creation and its marker."""
    fresh = folder(tmp_path, "sre-tools-fresh", None)
    old = folder(tmp_path, "sre-tools-old", None)
    age(old, scratch.UNMARKED_GRACE_SECONDS + 60)
    assert scratch.sweep_stale_scratch(tmp_path) == [old]
    assert fresh.exists()


def test_only_this_users_own_folders_with_the_known_names_are_touched(tmp_path) -> None:
    other_name = folder(tmp_path, "sregym-build-x", dead_owner())
    malformed = folder(tmp_path, "sre-tools-malformed", "not a marker")
    target = folder(tmp_path, "elsewhere", dead_owner())
    (tmp_path / "sre-tools-link").symlink_to(target)
    if os.getuid() == 0:
        foreign = folder(tmp_path, "sre-tools-foreign", dead_owner())
        os.chown(foreign, 12345, 12345)
    assert scratch.sweep_stale_scratch(tmp_path) == []
    assert other_name.exists() and malformed.exists() and target.exists()


def test_made_folders_are_private_and_marked_with_their_owner(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    made = scratch.make_scratch_dir("sre-tools-")
    assert made.parent == tmp_path and (made.stat().st_mode & 0o777) == 0o700
    assert (made / scratch.MARKER).read_text().split() == this_process().split()
    assert scratch.sweep_stale_scratch(tmp_path) == []  # its owner (this process) lives
    with pytest.raises(AssertionError):
        scratch.make_scratch_dir("other-")
