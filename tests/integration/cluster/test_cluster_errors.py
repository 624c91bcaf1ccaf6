"""Errors a user can cause on `sregym cluster up` end in one clear message and an exit code."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sregym.cluster.local.paths import LocalPaths

SREGYM = [sys.executable, "-m", "sregym"]


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SREGYM, *args], capture_output=True, text=True, env=env, timeout=120)


def _one_clear_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr
    return proc.stderr


def test_missing_prerequisites_are_named_with_their_package(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = _run("cluster", "up", "--name", "prereq-test", env={"PATH": str(empty), "HOME": "/root"})
    assert proc.returncode == 4, proc.stderr
    err = _one_clear_error(proc)
    assert "missing prerequisites" in err and "containerd (Debian package containerd)" in err
    assert not LocalPaths("prereq-test").root.exists()  # nothing was created


def test_not_root_is_refused_with_a_hint(monkeypatch, capsys):
    from sregym.cli.main import run_cli

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    code = run_cli(["cluster", "up", "--name", "nonroot-test"])
    err = capsys.readouterr().err
    assert code == 4
    assert "needs root" in err and "Traceback" not in err
    assert not LocalPaths("nonroot-test").root.exists()


@pytest.mark.cluster
def test_port_in_use_names_the_port_and_component(cluster):
    from sregym.cluster.local.provider import LocalCluster
    from sregym.core.errors import PrerequisiteError

    if cluster.provider != "local":
        pytest.skip("local provider only")
    # The session's cluster holds the default ports, so a second cluster's preflight must refuse.
    # (Only the preflight runs: this test must never be able to start a second cluster.)
    assert LocalCluster(cluster.name).is_up()
    with pytest.raises(PrerequisiteError, match=r"port 2379 \(etcd\) is already in use") as err:
        LocalCluster("port-test")._preflight()
    assert "sregym cluster down" in str(err.value)
    assert not LocalPaths("port-test").root.exists()


def test_corrupt_data_dir_is_named_with_the_fix():
    paths = LocalPaths("corrupt-test")
    paths.root.mkdir(parents=True, exist_ok=True)
    (paths.root / "cluster.json").write_text("{not json")
    try:
        proc = _run("cluster", "up", "--name", "corrupt-test")
        assert proc.returncode == 3, proc.stderr
        err = _one_clear_error(proc)
        assert str(paths.root / "cluster.json") in err.replace("\n", "")
        assert "down --purge --name corrupt-test" in err
        assert json.loads('{"ok": 1}')  # sanity: the file we wrote is what's corrupt, not the parser
        assert (paths.root / "cluster.json").read_text() == "{not json"  # left as it was
    finally:
        shutil.rmtree(paths.root)


def test_logs_of_an_unknown_component_is_a_usage_error():
    proc = _run("cluster", "logs", "kube-apiservr")
    assert proc.returncode == 2
    assert "did you mean kube-apiserver" in _one_clear_error(proc)
