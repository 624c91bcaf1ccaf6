"""The engine on the real local cluster: a full run with the simplest agents writes a valid record
and leaves no fault behind; SIGKILL of `sregym run` at several phases, then `sregym cleanup`,
leaves no fault in place; `sregym validate` proves the test problem.

The problem (a ConfigMap key rewritten by the built-in ``config_value`` primitive, judged by the
built-in ``configmap_value`` oracle) and its app (one pause pod and one ConfigMap) live next to
this file and are loaded the way a researcher's would be (``--problems-dir``, ``--charts-dir``).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sregym.conductor.timeline import FIRST_NOISE_WITHIN
from sregym.core.record import RunRecord

HERE = Path(__file__).parent
PROBLEM = "tiny_settings_drift"
NAMESPACE = "tiny"

pytestmark = pytest.mark.cluster


def sregym_args(cluster, *args: str) -> list[str]:
    return [sys.executable, "-m", "sregym", *args, "--problems-dir", str(HERE / "problems"),
            "--kubeconfig", str(cluster.kubeconfig)]


def run_args(cluster, out: Path, agent: str = "noop", grade_window: str = "3") -> list[str]:
    return sregym_args(cluster, "run", "--problem", PROBLEM, "--agent", agent, "--noise", "off", "--seed", "3",
                       "--out", str(out), "--charts-dir", str(HERE / "charts"), "--budget-seconds", "60",
                       "--baseline-window", "1", "--grade-window", grade_window, "--verify-timeout", "30")


@pytest.fixture()
def state(tmp_path: Path) -> dict[str, str]:
    """A private journal folder (SREGYM_STATE) so these runs and cleanups see only their own."""
    return {**os.environ, "SREGYM_STATE": str(tmp_path / "state")}


@pytest.fixture(autouse=True)
def healthy_setting(cluster):
    """Each test starts from the app's healthy value, whatever an earlier failing test left."""
    from kubernetes.client.exceptions import ApiException

    try:
        cluster.kube.core.patch_namespaced_config_map("tiny-settings", NAMESPACE, {"data": {"greeting": "hello"}})
    except ApiException as e:
        if e.status != 404:  # not deployed yet: the first run deploys it healthy
            raise


def greeting(cluster) -> str | None:
    cm = cluster.kube.core.read_namespaced_config_map("tiny-settings", NAMESPACE)
    return (cm.data or {}).get("greeting")


def open_journals(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["SREGYM_STATE"]) / "journal").glob("*.jsonl"))


def journaled_helpers(env: dict[str, str]) -> dict[int, str]:
    """pid -> name of every helper process the open journals record."""
    from sregym.conductor.journal import read_journal

    return {pid: what for path in open_journals(env) for pid, what in read_journal(path).processes.items()}


def still_running(pid: int, env: dict[str, str]) -> bool:
    """Whether the journaled helper ``pid`` is still the process that was journaled (and not a zombie)."""
    from sregym.cluster.owned_processes import ProcessIdentity
    from sregym.conductor.journal import read_journal

    journaled = {p: h for path in open_journals(env) for p, h in read_journal(path).helpers.items()}
    now = ProcessIdentity.of(pid)
    start = journaled[pid].start if pid in journaled else None
    return now is not None and now.start == (start or now.start)


def test_a_run_with_the_noop_agent_writes_a_valid_record_and_leaves_no_fault(cluster, tmp_path, state):
    out = tmp_path / "runs"
    proc = subprocess.run(run_args(cluster, out), env=state, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    [path] = list(out.glob("*.json"))
    record = RunRecord.model_validate_json(path.read_text())
    assert record.problem_id == PROBLEM and record.status == "completed"
    assert record.agent.name == "noop" and record.trajectory.submission("mitigation") is not None
    assert record.mechanisms == {"greeting": "kubernetes-api"}
    assert record.timeline[0].ok and record.timeline[0].done_at is not None
    # The noop agent changed nothing, so the rewritten key was still there when graded.
    assert record.grades.mitigation is not None and record.grades.mitigation.passed is False
    assert "goodbye" in json.dumps(record.grades.mitigation.checks[0].evidence)
    assert set(record.phases) >= {"prepare", "baseline", "sandbox", "inject", "agent", "grade", "recover"}
    # the agent plane opened while the baseline was measured and the fault went in, not after
    starts, took = record.phase_starts, record.phases
    assert starts["sandbox"] < starts["baseline"] + took["baseline"], (starts, took)
    assert starts["agent"] >= max(starts["sandbox"] + took["sandbox"], starts["inject"] + took["inject"]), (starts, took)
    assert greeting(cluster) == "hello"
    assert open_journals(state) == []
    assert sandbox_namespaces(cluster) == []


def test_the_agents_first_read_already_sees_the_fault(cluster, tmp_path, state):
    """The sandbox opens alongside the baseline and the injection, but the agent is handed its task
    only once the fault is in place: its very first command, a kubectl read through its own limited
    kubeconfig, sees the rewritten key (``hello`` would mean it was let in before the fault)."""
    out = tmp_path / "runs"
    # the agent reads once and stops with an error, so the tail of its output lands in the run's
    # note on stderr (a command that exits 0 counts as submitted, and its output is not kept)
    read = "kubectl -n tiny get configmap tiny-settings -o jsonpath={.data.greeting}"
    script = "sh -c " + shlex.quote(f'echo "first-read=$({read})"; exit 3')
    proc = subprocess.run(run_args(cluster, out, agent="command"), env={**state, "SREGYM_AGENT_COMMAND": script},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    record = RunRecord.model_validate_json(next(out.glob("*.json")).read_text())
    assert record.trajectory.stop_reason == "error", record.trajectory
    err = proc.stderr.replace("\n", "")
    assert "exited with 3" in err and "first-read=goodbye" in err, proc.stderr
    assert greeting(cluster) == "hello"
    assert open_journals(state) == []


def sandbox_namespaces(cluster) -> list[str]:
    """Agent sandbox namespaces still there and not already going away."""
    from sregym.agentplane.sandbox import NAMESPACE_PREFIX

    return [ns.metadata.name for ns in cluster.kube.core.list_namespace().items
            if ns.metadata.name.startswith(NAMESPACE_PREFIX + "-") and ns.status.phase != "Terminating"]


def test_the_oracle_agent_mitigates_and_is_never_ranked(cluster, tmp_path, state):
    out = tmp_path / "runs"
    proc = subprocess.run(run_args(cluster, out, agent="oracle"), env=state, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    record = RunRecord.model_validate_json(next(out.glob("*.json")).read_text())
    assert record.agent.kind == "oracle" and record.agent.leaderboard is False
    assert record.grades.mitigation.passed is True
    diagnosis = record.trajectory.submission("diagnosis")
    assert diagnosis is not None and "greeting" in diagnosis.text
    assert greeting(cluster) == "hello"


def wait_for_journal_op(env: dict[str, str], op: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in open_journals(env):
            if any(json.loads(line).get("op") == op for line in path.read_text().splitlines() if line.strip()):
                return
        assert proc.poll() is None, f"sregym run ended before writing {op!r}: {proc.stderr.read()}"
        time.sleep(0.05)
    raise AssertionError(f"no {op!r} entry in the journal after {timeout}s")


@pytest.mark.parametrize(("op", "delay"), [("intent", 0.0), ("applied", 0.0), ("process", 0.0), ("applied", 4.0)],
                         ids=["right-after-intent", "right-after-inject", "agent-tool-server-up", "during-grade"])
def test_sigkill_at_any_phase_then_cleanup_leaves_no_fault(cluster, tmp_path, state, op, delay):
    proc = subprocess.Popen(run_args(cluster, tmp_path / "runs", grade_window="30"), env=state,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    held: dict[int, str] = {}
    try:
        wait_for_journal_op(state, op, proc)
        time.sleep(delay)
        if op == "process":
            # Frozen before the conductor dies, the helpers cannot end on their own (the API proxy
            # exits with its parent within a second, before cleanup even starts): they stand for a
            # helper that hangs, which cleanup must stop and name.
            held = freeze(journaled_helpers(state), state)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        check_cleanup_after_sigkill(cluster, state, op, held)
    finally:
        for pid in held:  # whatever happened, no frozen process of this test stays
            if still_running(pid, state):
                os.kill(pid, signal.SIGKILL)


def freeze(helpers: dict[int, str], env: dict[str, str]) -> dict[int, str]:
    """SIGSTOP each journaled helper that is still the journaled process (through a pidfd)."""
    held = {}
    for pid, what in helpers.items():
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            if still_running(pid, env):
                signal.pidfd_send_signal(fd, signal.SIGSTOP)
                held[pid] = what
        finally:
            os.close(fd)
    return held


def check_cleanup_after_sigkill(cluster, state: dict[str, str], op: str, held: dict[int, str]) -> None:
    assert open_journals(state), "the killed run left no journal"
    helpers = journaled_helpers(state)
    clean = subprocess.run([sys.executable, "-m", "sregym", "cleanup", "--kubeconfig", str(cluster.kubeconfig)],
                           env=state, capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr
    assert "clean" in clean.stderr
    if op == "process":  # the agent's helpers (API proxy first, then the tool server) must not outlive the run
        assert held, f"the run was killed after journaling a helper process, yet none was running: {helpers}"
        stopped = clean.stderr.replace("\n", "")
        for pid, what in held.items():
            assert f"{what} ({pid})" in stopped, f"{what} ({pid}) was running, cleanup did not say it stopped it"
    assert not [f"{what} ({pid})" for pid, what in helpers.items() if still_running(pid, state)], \
        "a journaled helper of the killed run outlived cleanup"
    assert greeting(cluster) == "hello"
    assert open_journals(state) == []
    again = subprocess.run([sys.executable, "-m", "sregym", "cleanup", "--kubeconfig", str(cluster.kubeconfig)],
                           env=state, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "nothing to clean" in again.stderr


def test_validate_proves_the_problem(cluster, state):
    proc = subprocess.run(sregym_args(cluster, "validate", PROBLEM, "--charts-dir", str(HERE / "charts"),
                                      "--grade-window", "2", "--verify-timeout", "30"),
                          env=state, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid" in proc.stdout and "INVALID" not in proc.stdout
    assert greeting(cluster) == "hello"


def test_seeded_noise_runs_before_the_page_and_is_recovered(cluster, tmp_path, state):
    out = tmp_path / "runs"
    # an agent that looks for 10 s: noise due after an agent submitted is never played, and the
    # agent phase now starts at the page (its sandbox opened alongside the injection), so the noop
    # agent would end the run before the first window's events are due
    args = run_args(cluster, out, agent="command")
    args[args.index(PROBLEM)] = f"{PROBLEM}_noisy"
    args[args.index("off")] = "on"
    proc = subprocess.run(args, env={**state, "SREGYM_AGENT_COMMAND": "sleep 10"}, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    record = RunRecord.model_validate_json(next(out.glob("*.json")).read_text())
    # The page comes at 8 s (the fault's start); noise windows start there, as background trouble
    # meets the agent from the start: the first 8 s window after the page has its two events, the
    # first within FIRST_NOISE_WITHIN of the page, none before it.
    starts = [e for e in record.timeline if e.kind == "noise" and e.action == "start"]
    early = [e for e in starts if e.at < 8 + 8]
    assert len(early) == 2 and all(e.at >= 8 for e in starts), [e.at for e in starts]
    assert min(e.at for e in early) - 8 <= FIRST_NOISE_WITHIN
    assert all(e.ok and e.mechanism for e in early), [e.error for e in early]
    assert record.status == "completed" and record.noise is True
    assert greeting(cluster) == "hello"
    assert open_journals(state) == []


# A shell starts background jobs (`sregym ... &`, nohup) with SIGINT ignored; `kill` must still stop
# them cleanly (it did not: SIGTERM was re-sent as the ignored SIGINT and the run went on).
# The agent plane opens while the release is checked and the baseline is measured ("sandbox" is
# journaled before the fault goes in): an interrupt then stops both, and neither the sandbox nor a
# fault is left behind.
@pytest.mark.parametrize(("signum", "sigint_at_start", "op", "delay"),
                         [(signal.SIGINT, signal.SIG_DFL, "applied", 1.0), (signal.SIGTERM, signal.SIG_DFL, "applied", 1.0),
                          (signal.SIGTERM, signal.SIG_IGN, "applied", 1.0), (signal.SIGINT, signal.SIG_DFL, "sandbox", 0.0)],
                         ids=["ctrl-c", "sigterm", "sigterm-to-a-background-job", "ctrl-c-while-the-sandbox-opens"])
def test_ctrl_c_or_sigterm_recovers_then_exits_130(cluster, tmp_path, state, signum, sigint_at_start, op, delay):
    out = tmp_path / "runs"
    proc = subprocess.Popen(run_args(cluster, out, grade_window="30"), env=state, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint_at_start))
    try:
        wait_for_journal_op(state, op, proc)
        time.sleep(delay)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err
    record = RunRecord.model_validate_json(next(out.glob("*.json")).read_text())
    assert record.status == "aborted"
    # The agent plane now opens while the release is checked, so an interrupt as it opens may come
    # before the fault plane is (nothing was changed: no recover phase); once the baseline started,
    # the fault plane stood and recover must have run.
    if op == "applied" or "baseline" in record.phases:
        assert "recover" in record.phases, record.phases
    assert greeting(cluster) == "hello"
    assert open_journals(state) == []
    assert sandbox_namespaces(cluster) == []
