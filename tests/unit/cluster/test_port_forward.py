"""A port-forward is a kubectl process on this host's loopback, started until kubectl says where it
listens, and stopped by its PID (here kubectl is a stand-in script: no cluster). Each kubectl is
recorded while it runs, so cleanup can stop it when sregym was killed."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from sregym.cluster import owned_processes, port_forward
from sregym.cluster.port_forward import PortForward
from sregym.core.errors import ClusterError, PrerequisiteError

CLUSTER = SimpleNamespace(kubeconfig=Path("/k/admin.kubeconfig"), context="lab")


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path / "state"))
    return tmp_path / "state"


def recorded(state: Path) -> list[owned_processes.Recorded]:
    return [r for path in (state / "processes").glob("*.jsonl") for r in owned_processes._read(path)]


def fake_kubectl(tmp_path: Path, monkeypatch, script: str) -> Path:
    path = tmp_path / "kubectl"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    monkeypatch.setattr(port_forward, "kubectl_path", lambda: str(path))
    return path


def test_it_binds_only_loopback_on_the_clusters_kubeconfig_and_context(monkeypatch):
    monkeypatch.setattr(port_forward, "kubectl_path", lambda: "kubectl")
    forward = PortForward(CLUSTER, "observability", "prometheus", 9090)
    assert forward.argv(0) == ["kubectl", "--kubeconfig", "/k/admin.kubeconfig", "--context", "lab",
                               "-n", "observability", "port-forward", "--address", "127.0.0.1",
                               "svc/prometheus", ":9090"]
    assert forward.argv(41234)[-1] == "41234:9090"  # a restart asks for its old port first


def test_it_returns_the_port_kubectl_chose_and_is_gone_after_stop(tmp_path, monkeypatch, state):
    fake_kubectl(tmp_path, monkeypatch, 'echo "Forwarding from 127.0.0.1:41234 -> 9090"\nexec sleep 60\n')
    forward = PortForward(CLUSTER, "observability", "prometheus", 9090)
    assert forward.start() == "http://127.0.0.1:41234"
    assert forward.alive() and forward.pid
    pid = forward.pid
    assert [r.identity.pid for r in recorded(state)] == [pid]  # until it is stopped, cleanup would stop it
    forward.stop()
    assert not forward.alive()
    assert recorded(state) == []
    assert not os.path.exists(f"/proc/{pid}")  # stopped and reaped
    assert forward.port == 41234


def test_a_forward_that_cannot_start_is_one_clear_error_and_leaves_no_process(tmp_path, monkeypatch):
    fake_kubectl(tmp_path, monkeypatch, 'echo "error: unable to forward port because pod is not running"\nexit 1\n')
    forward = PortForward(CLUSTER, "observability", "log-query", 8080)
    with pytest.raises(ClusterError, match="svc/log-query.*pod is not running"):
        forward.start(timeout=5)
    assert not forward.alive()


def test_a_forward_that_cannot_be_recorded_is_not_left_running(tmp_path, monkeypatch, state):
    """No kubectl runs that a killed sregym would leave beyond cleanup's reach."""
    fake_kubectl(tmp_path, monkeypatch, 'echo "Forwarding from 127.0.0.1:41234 -> 9090"\nexec sleep 60\n')
    state.write_text("a file where the state folder should be")
    forward = PortForward(CLUSTER, "observability", "prometheus", 9090)
    with pytest.raises(PrerequisiteError, match="cannot record the helper process kubectl port-forward svc/prometheus"):
        forward.start()
    assert not forward.alive() and not os.path.exists(f"/proc/{forward.pid}")


def test_a_kubectl_wrapper_that_execs_the_real_one_is_recorded_as_what_runs(tmp_path, monkeypatch, state):
    """Cleanup only stops a process whose command line is the recorded one: the record follows an exec."""
    fake_kubectl(tmp_path, monkeypatch, 'exec python3 -c "import time; print(\'Forwarding from 127.0.0.1:41234 '
                                        '-> 9090\', flush=True); time.sleep(60)"\n')
    forward = PortForward(CLUSTER, "observability", "prometheus", 9090)
    forward.start()
    try:
        (record,) = recorded(state)
        assert record.identity == owned_processes.ProcessIdentity.of(forward.pid)
        assert record.identity.cmdline[0] == "python3"
    finally:
        forward.stop()
    assert recorded(state) == []
