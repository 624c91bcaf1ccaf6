"""The thread executor for real (issue 20, point 3; its Jobs twin is test_suite_jobs_on_cluster.py):
`sregym suite run --parallel 2` on this host runs two cells of the tiny problem at once, threads of
one conductor process, one in the app's namespace and one in its second slot. The process is
SIGKILLed once both cells' faults are journaled applied (a lost host: neither cell recovers or
records anything); `sregym cleanup` undoes both faults from their journals, and the resumed suite
runs exactly those two cells, to completed records.

The run has a state folder of its own (SREGYM_STATE), so cleanup touches only its journals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from polling import eventually
from sregym.conductor.suite import read_index
from sregym.report.records import load_records

# ci tier: 47 s on 2026-11-27 (two tiny cells at once, killed, cleaned, two again)
pytestmark = pytest.mark.cluster

HERE = Path(__file__).parent
PROBLEM = "tiny_settings_drift"


def sregym(env: dict[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sregym", *args], start_new_session=True, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def applied_journals(state: Path) -> list[Path]:
    """The journals of the run's cells whose fault is applied and not recovered."""
    found = []
    for path in (state / "journal").glob("*.jsonl"):
        ops = [json.loads(line).get("op") for line in path.read_text().splitlines() if line.strip().endswith("}")]
        if "applied" in ops and "recovered" not in ops:
            found.append(path)
    return found


def greetings(cluster) -> dict[str, str]:
    out = {}
    for ns in ("tiny", "tiny-p1"):
        try:
            out[ns] = cluster.kube.core.read_namespaced_config_map("tiny-settings", ns).data["greeting"]
        except Exception:  # noqa: BLE001 - a slot not deployed (yet)
            out[ns] = ""
    return out


def test_two_cells_run_as_threads_at_once_and_a_killed_suite_is_cleaned_and_resumed(cluster, tmp_path):
    problems = tmp_path / "problems"
    (problems / "suites").mkdir(parents=True)
    (problems / "suites" / "tiny2.yaml").write_text(yaml.safe_dump(
        {"name": "tiny2", "description": "the tiny problem, two seeds", "problems": [PROBLEM], "seeds": 2}))
    state, out = tmp_path / "state", tmp_path / "night"
    env = {**os.environ, "SREGYM_STATE": str(state)}
    # the Jobs twin (run just before) deletes the slot it made: a slot still terminating refuses
    # this suite's deploy into it, and CI's first attempt timed out so (its cleanup then met a 404)
    eventually(lambda: all(n.metadata.name != "tiny-p1" or n.status.phase == "Active"
                           for n in cluster.kube.core.list_namespace().items),
               timeout=120, every=1, what="a terminating tiny-p1 to be gone")
    had_slot = any(n.metadata.name == "tiny-p1" and n.status.phase == "Active"
                   for n in cluster.kube.core.list_namespace().items)
    args = ["suite", "run", "--suite", "tiny2", "--agent", "noop", "--seeds", "2", "--noise", "off",
            "--parallel", "2", "--out", str(out), "--problems-dir", str(HERE / "problems"),
            "--problems-dir", str(problems), "--charts-dir", str(HERE / "charts"),
            "--kubeconfig", str(cluster.kubeconfig), "--budget-seconds", "10", "--baseline-window", "1",
            "--grade-window", "3", "--verify-timeout", "30"]
    # The first run is killed once both faults hold, so its grade window only keeps each cell's fault
    # in place long enough for the other's to join it: with 3 s, a cell in the reused namespace ran
    # out before the slot's fresh deploy (the Jobs twin deletes the slot) and the two never overlapped
    # (CI of 2026-11-27 night: "did not hold within 240s", passed on its rerun with the slot there).
    first = [*args[:args.index("--grade-window") + 1], "60", *args[args.index("--grade-window") + 2:]]
    proc = sregym(env, *first)
    try:
        # both cells in flight at once: two journals applied, each fault in its own namespace
        eventually(lambda: proc.poll() is None and len(applied_journals(state)) == 2
                   and set(greetings(cluster).values()) == {"goodbye"},
                   timeout=240, every=0.5, what="both cells' faults applied together")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert read_index(out) == []  # killed mid-cell: neither cell recorded anything
        assert greetings(cluster) == {"tiny": "goodbye", "tiny-p1": "goodbye"}  # and nothing recovered

        cleanup = subprocess.run([sys.executable, "-m", "sregym", "cleanup", "--kubeconfig",
                                  str(cluster.kubeconfig)], env=env, capture_output=True, text=True, timeout=300)
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert greetings(cluster) == {"tiny": "hello", "tiny-p1": "hello"}
        assert applied_journals(state) == []

        resumed = sregym(env, *args, "--resume")
        log, _ = resumed.communicate(timeout=300)
        assert resumed.returncode == 0, log[-4000:]
        records = load_records([out])
        assert sorted((r.seed, r.status) for r in records) == [(0, "completed"), (1, "completed")], log[-4000:]
        assert {r.namespace for r in records} == {"tiny", "tiny-p1"}  # again two at once, one slot each
        assert all(r.grades.mitigation.passed is False for r in records)  # noop fixed nothing
        assert greetings(cluster) == {"tiny": "hello", "tiny-p1": "hello"}  # each cell recovered its own
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        subprocess.run([sys.executable, "-m", "sregym", "cleanup", "--force", "--kubeconfig", str(cluster.kubeconfig)],
                       env=env, capture_output=True, text=True, timeout=300)
        if not had_slot and any(n.metadata.name == "tiny-p1" for n in cluster.kube.core.list_namespace().items):
            cluster.kube.core.delete_namespace("tiny-p1")
