"""Config rendering and certificates of the local provider (pure logic, no cluster)."""

from __future__ import annotations

import json
import tarfile

import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID

from sregym.cluster import oci
from sregym.cluster.binaries import KUBERNETES, wrapper_gomod
from sregym.cluster.local import config
from sregym.cluster.local.paths import LocalPaths
from sregym.cluster.pki import ClusterPKI


def test_wrapper_gomod_pins_every_staging_module_to_the_matching_release():
    text = wrapper_gomod(KUBERNETES, ["k8s.io/api", "k8s.io/kubelet"])
    assert "require k8s.io/kubernetes v1.35.4" in text
    assert "k8s.io/api => k8s.io/api v0.35.4" in text
    assert "k8s.io/kubelet => k8s.io/kubelet v0.35.4" in text


def test_kubelet_config_runs_on_cgroup_v1_with_cgroupfs_and_cluster_dns(tmp_path, monkeypatch):
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path))
    net, ports = config.LocalNetwork(), config.LocalPorts()
    doc = yaml.safe_load(config.kubelet_config(LocalPaths("t"), net, ports))
    assert doc["failCgroupV1"] is False
    assert doc["cgroupDriver"] == "cgroupfs"
    assert doc["clusterDNS"] == [net.dns_ip]
    assert doc["containerRuntimeEndpoint"] == f"unix://{tmp_path}/clusters/t/containerd/containerd.sock"
    assert doc["authentication"]["anonymous"]["enabled"] is False


def test_containerd_config_restricts_oom_score_adj_and_uses_runc(tmp_path, monkeypatch):
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path))
    text = config.containerd_toml(LocalPaths("t"), config.LocalNetwork())
    assert "restrict_oom_score_adj = true" in text
    assert 'runtime_type = "io.containerd.runc.v2"' in text
    assert "SystemdCgroup = false" in text
    assert f'address = "{tmp_path}/clusters/t/containerd/containerd.sock"' in text


def test_cni_uses_our_bridge_without_masquerade_and_keeps_ipam_state_in_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path))
    net = config.LocalNetwork(bridge="sg-x")
    doc = json.loads(config.cni_conflist(LocalPaths("x"), net))
    bridge = doc["plugins"][0]
    assert bridge["bridge"] == "sg-x" and bridge["ipMasq"] is False
    assert bridge["ipam"]["ranges"][0][0]["gateway"] == net.node_ip
    assert bridge["ipam"]["dataDir"].startswith(str(tmp_path))


def test_bridge_names_fit_the_kernel_limit():
    assert config.bridge_name("default") == "sregym0"
    assert len(config.bridge_name("a-very-long-cluster-name")) <= 15


def test_coredns_never_forwards_outside_the_cluster():
    docs = list(yaml.safe_load_all(config.coredns_manifests(config.LocalNetwork(), "img:1")))
    corefile = next(d for d in docs if d["kind"] == "ConfigMap")["data"]["Corefile"]
    assert "forward" not in corefile
    assert "rcode NXDOMAIN" in corefile
    svc = next(d for d in docs if d["kind"] == "Service")
    assert svc["spec"]["clusterIP"] == "10.96.0.10"


def test_pki_issues_certs_with_kubernetes_identities_and_reuses_them(tmp_path):
    pki = ClusterPKI(tmp_path)
    pki.ensure_ca()
    pair = pki.issue("kubelet-client", "system:node:n1", orgs=("system:nodes",))
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n1"
    assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
    before = pair.cert.read_bytes()
    pki.issue("kubelet-client", "system:node:n1", orgs=("system:nodes",))
    assert pair.cert.read_bytes() == before  # idempotent: same subject, not re-issued
    server = pki.issue("apiserver", "kube-apiserver", server=True, client=False, dns=("kubernetes",),
                       ips=("10.96.0.1",))
    san = x509.load_pem_x509_certificate(server.cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["10.96.0.1"]


def test_kubeconfig_embeds_ca_and_client_credentials(tmp_path):
    pki = ClusterPKI(tmp_path)
    pki.ensure_ca()
    pair = pki.issue("admin-client", "kubernetes-admin", orgs=("system:masters",))
    path = pki.kubeconfig(tmp_path / "k", server="https://127.0.0.1:6443", user="admin", pair=pair, cluster="c")
    doc = yaml.safe_load(path.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert doc["users"][0]["user"]["client-key-data"]
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_docker_archive_has_manifest_config_and_layer_with_the_file(tmp_path):
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF-not-really")
    out = tmp_path / "img.tar"
    image_id = oci.write_docker_archive(out, "registry.k8s.io/pause:3.10", {"/pause": (binary, 0o755)},
                                        entrypoint=["/pause"])
    with tarfile.open(out) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
        assert manifest[0]["RepoTags"] == ["registry.k8s.io/pause:3.10"]
        assert manifest[0]["Config"] == image_id.split(":")[1] + ".json"
        cfg = json.load(tar.extractfile(manifest[0]["Config"]))
        assert cfg["config"]["Entrypoint"] == ["/pause"]
        layer = tarfile.open(fileobj=tar.extractfile(manifest[0]["Layers"][0]))
        member = layer.getmember("pause")
        assert member.mode == 0o755 and layer.extractfile(member).read() == b"\x7fELF-not-really"
