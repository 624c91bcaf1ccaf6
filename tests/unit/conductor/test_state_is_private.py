"""The conductor's state on its host holds the answer: a run journal's header names the problem
and each intent the fault it is about to inject. An agent placed on the host runs as an
unprivileged user (`--agent-host --run-as USER`, docs/agents.md) precisely so that it cannot read
it. Measured 2026-11-28: the journal folder was 0755 and its files 0644, so `nobody` read
`"problem_id":"latent_sector_error"` from an open journal. Played here as that user would."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from sregym.cluster import owned_processes
from sregym.conductor.journal import Intent, Journal, RunHeader
from procfs import ended

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to read as another user (CI runs as root)")


@pytest.fixture
def state(monkeypatch):
    """A state root as /var/lib/sregym is: 0755, on a path any user can walk (pytest's own tmp is 0700,
    which would hide everything below it whatever sregym does)."""
    root = Path(tempfile.mkdtemp(prefix="sregym-state-", dir="/tmp"))
    root.chmod(0o755)
    monkeypatch.setenv("SREGYM_STATE", str(root))
    yield root
    subprocess.run(["rm", "-rf", str(root)], check=False)


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv],
                          capture_output=True, text=True, timeout=30)


def header() -> RunHeader:
    return RunHeader(run_id="r1", problem_id="latent_sector_error", kubeconfig="/k", pid=os.getpid(),
                     pid_start="1")


def test_an_unprivileged_host_agent_cannot_read_the_open_journal(state):
    journal = Journal("r1")
    journal.start(header())
    read = as_nobody("cat", str(journal.path))
    assert "latent_sector_error" not in read.stdout and read.returncode != 0, read.stdout
    listed = as_nobody("ls", str(journal.path.parent))
    assert listed.returncode != 0 and "r1" not in listed.stdout


def test_nor_a_closed_one_nor_a_folder_made_open_by_an_older_sregym(state):
    (state / "journal").mkdir(mode=0o755)
    (state / "journal").chmod(0o755)  # as an older sregym left it
    journal = Journal("r2")
    journal.start(header())
    journal.close()
    assert oct(journal.path.stat().st_mode & 0o777) == "0o600"
    for folder in (state / "journal", state / "journal" / "closed"):
        assert oct(folder.stat().st_mode & 0o777) == "0o700", folder
    assert as_nobody("cat", str(journal.path)).returncode != 0


def test_the_helper_process_records_are_private_too(state):
    proc = subprocess.Popen(["sleep", "30"])
    try:
        owned_processes.record(proc.pid, "a port-forward")
        folder = owned_processes.records_dir()
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        assert as_nobody("ls", str(folder)).returncode != 0
    finally:
        proc.kill()
        proc.wait()


def test_the_local_clusters_daemon_logs_are_private(state):
    """The controller manager's and kubelet's logs name the fault plane's pods and the objects a
    fault edits; they were 0755/0644 beside the journals."""
    from sregym.cluster.local import processes
    from sregym.cluster.local.paths import LocalPaths

    paths = LocalPaths("t")
    paths.logs.mkdir(parents=True, mode=0o755)
    paths.logs.chmod(0o755)  # as a cluster started by an older sregym left it
    pid = processes.start(paths, processes.Daemon("sleeper", ["/bin/sleep", "30"]))
    try:
        assert oct(paths.logs.stat().st_mode & 0o777) == "0o700"
        assert as_nobody("cat", str(paths.log("sleeper"))).returncode != 0
    finally:
        processes.stop(paths, "sleeper", timeout=5)
    assert ended(pid)
