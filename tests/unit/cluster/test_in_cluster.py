"""sregym inside a pod writes its own kubeconfig from its ServiceAccount (the nightly chart's runner
and each suite cell's Job used to carry a shell copy of it each)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sregym.cluster import in_cluster, providers
from sregym.core.errors import ClusterError


@pytest.fixture
def account(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("t0ken")
    (folder / "ca.crt").write_text("CA")
    (folder / "namespace").write_text("sregym-nightly\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return folder


def test_the_kubeconfig_names_the_in_cluster_api_the_ca_and_the_token_file(account, tmp_path):
    path = in_cluster.write_kubeconfig(tmp_path / "kc", account)
    config = yaml.safe_load(path.read_text())
    [cluster], [user] = config["clusters"], config["users"]
    assert cluster["cluster"] == {"server": "https://10.96.0.1:443", "certificate-authority": str(account / "ca.crt")}
    # by file, not by value: the projected token rotates and is read again
    assert user["user"] == {"tokenFile": str(account / "token")} and "t0ken" not in path.read_text()
    assert config["current-context"] == config["contexts"][0]["name"]
    assert path.stat().st_mode & 0o077 == 0


def test_an_ipv6_api_address_is_bracketed(account, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    assert in_cluster.kubeconfig_for_service_account(account)["clusters"][0]["cluster"]["server"] == \
        "https://[fd00::1]:443"


def test_outside_a_pod_there_is_no_namespace_and_no_kubeconfig(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert in_cluster.pod_namespace(tmp_path / "none") is None
    with pytest.raises(ClusterError, match="not inside a pod"):
        in_cluster.kubeconfig_for_service_account(tmp_path / "none")


def test_a_pod_without_flags_or_a_cluster_up_acts_on_its_own_cluster(account, tmp_path, monkeypatch):
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path / "state"))  # no current.json, no local cluster
    namespace, write = in_cluster.pod_namespace, in_cluster.write_kubeconfig  # at the test's service account
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda: namespace(account))
    monkeypatch.setattr(in_cluster, "write_kubeconfig", lambda: write(tmp_path / "written.kubeconfig", account))
    handle = providers.current_cluster()
    assert handle.provider == "existing" and handle.kubeconfig == tmp_path / "written.kubeconfig"
    assert yaml.safe_load(handle.kubeconfig.read_text())["users"][0]["user"]["tokenFile"] == str(account / "token")



def test_cleanup_in_a_pod_undoes_a_lost_pods_journal_on_this_cluster(account, tmp_path, monkeypatch):
    """A killed night's journal names the kubeconfig that lived in its (gone) pod: the next night's
    pod reaches the same cluster through its own ServiceAccount instead of skipping the journal."""
    from types import SimpleNamespace

    import sregym.conductor.cleanup as cleanup_module
    from sregym.cli.main import run_cli

    namespace, write = in_cluster.pod_namespace, in_cluster.write_kubeconfig
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda: namespace(account))
    monkeypatch.setattr(in_cluster, "write_kubeconfig", lambda: write(tmp_path / "written.kubeconfig", account))
    seen = []
    monkeypatch.setattr(cleanup_module, "cleanup_all", lambda kube_for, force=False: seen.append(
        kube_for(SimpleNamespace(kubeconfig="/tmp/kubeconfig-of-a-lost-pod", context=None))) or [])
    monkeypatch.setattr(cleanup_module, "sweep_scratch", lambda: [])
    assert run_cli(["cleanup"]) == 0
    [kube] = seen
    assert kube is not None and Path(kube.kubeconfig) == tmp_path / "written.kubeconfig"
