"""A helper process (a port-forward's kubectl) is recorded with its identity as soon as it starts; when
its owner is killed, cleanup stops it, but only while it is still that very process: a pid the
kernel gave to another process since (another start time, another command line) is never killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sregym.cluster import owned_processes
from sregym.cluster.owned_processes import ProcessIdentity
from sregym.core.errors import PrerequisiteError

OWNER = """
import subprocess, sys, time
from sregym.cluster import owned_processes
helper = subprocess.Popen(["sleep", "300"], start_new_session=True)
owned_processes.record(helper.pid, "sleep for the test")
print(helper.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def killed_owner(tmp_path, monkeypatch):
    """A Python process that started and recorded a helper, then was SIGKILLed: (helper pid, records)."""
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, env=env)
    helper = int(owner.stdout.readline())
    owner.kill()
    owner.wait()
    owner.stdout.close()
    yield helper, tmp_path / "processes"
    if ProcessIdentity.of(helper) is not None:
        os.kill(helper, signal.SIGKILL)


def rewrite(records: Path, **changes) -> None:
    (path,) = records.glob("*.jsonl")
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**e, **changes}) + "\n" for e in entries))


def test_cleanup_stops_the_helper_of_a_killed_owner_once(killed_owner):
    helper, records = killed_owner
    assert ProcessIdentity.of(helper) is not None  # the owner's death did not take it along
    stopped, errors = owned_processes.stop_orphans(records)
    assert (stopped, errors) == ([f"sleep for the test (pid {helper})"], [])
    assert ProcessIdentity.of(helper) is None
    assert list(records.glob("*")) == []
    assert owned_processes.stop_orphans(records) == ([], [])  # idempotent


def test_a_pid_whose_start_time_differs_is_not_killed(killed_owner):
    """The recorded process exited and the kernel gave its pid to another: same pid, another start."""
    helper, records = killed_owner
    rewrite(records, start=str(int(ProcessIdentity.of(helper).start) - 1))
    assert owned_processes.stop_orphans(records) == ([], [])
    assert ProcessIdentity.of(helper) is not None
    assert list(records.glob("*")) == []  # the recorded process is gone: nothing left to do


def test_a_pid_whose_command_line_differs_is_not_killed(killed_owner):
    helper, records = killed_owner
    rewrite(records, cmdline=["kubectl", "port-forward", "svc/prometheus", ":9090"])
    assert owned_processes.stop_orphans(records) == ([], [])
    assert ProcessIdentity.of(helper) is not None


def test_the_helpers_of_a_live_owner_are_left_to_it(tmp_path):
    helper = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        owned_processes.record(helper.pid, "sleep for the test", directory=tmp_path)
        assert owned_processes.stop_orphans(tmp_path) == ([], [])  # this test process owns it
        assert helper.poll() is None
    finally:
        helper.kill()
        helper.wait()


def test_a_helper_stopped_by_its_owner_leaves_no_record(tmp_path):
    first = subprocess.Popen(["sleep", "300"])
    second = subprocess.Popen(["sleep", "300"])
    try:
        one = owned_processes.record(first.pid, "first", directory=tmp_path)
        two = owned_processes.record(second.pid, "second", directory=tmp_path)
        assert one == ProcessIdentity.of(first.pid) and one.cmdline == ("sleep", "300")
        owned_processes.forget(one, directory=tmp_path)
        assert [r.what for r in owned_processes._read(next(tmp_path.glob("*.jsonl")))] == ["second"]
        owned_processes.forget(two, directory=tmp_path)
        assert list(tmp_path.glob("*")) == []
    finally:
        for proc in (first, second):
            proc.kill()
            proc.wait()


def test_a_state_folder_that_cannot_be_written_is_one_clear_error(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(PrerequisiteError, match="cannot record the helper process x"):
        owned_processes.record(os.getpid(), "x", directory=blocked / "processes")


def test_a_zombie_is_not_running():
    proc = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert ProcessIdentity.of(proc.pid) is None  # exited, not reaped yet: nothing left to stop
    proc.wait()


def test_the_cleanup_command_stops_it_and_says_so(killed_owner, tmp_path):
    helper, records = killed_owner
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "SREGYM_STATE": str(tmp_path)}
    first = subprocess.run([sys.executable, "-m", "sregym", "cleanup"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert first.returncode == 0, first.stderr
    assert f"stopped 1 helper process(es) of killed sregym processes: sleep for the test (pid {helper})" in " ".join(
        first.stderr.split())
    assert ProcessIdentity.of(helper) is None
    again = subprocess.run([sys.executable, "-m", "sregym", "cleanup"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0 and "helper process" not in again.stderr, again.stderr
