"""The discovery sidecar turns pod and node lists into file_sd targets with Kubernetes SD's labels."""

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[3] / "charts/observability/images/prometheus/discovery.py"
_spec = importlib.util.spec_from_file_location("sregym_prom_discovery", _PATH)
disc = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = disc
_spec.loader.exec_module(disc)

POD = {
    "metadata": {"name": "frontend-1", "namespace": "hotel", "uid": "u1",
                 "labels": {"app.kubernetes.io/name": "frontend"},
                 "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}},
    "spec": {"nodeName": "node-a", "containers": [{"name": "app", "ports": [{"containerPort": 8080}]}]},
    "status": {"podIP": "10.88.0.5", "hostIP": "192.0.2.1", "phase": "Running",
               "conditions": [{"type": "Ready", "status": "True"}]},
}


def test_pod_target_has_address_and_kubernetes_sd_labels():
    [group] = disc.pod_targets({"items": [POD, {"metadata": {"name": "pending"}, "spec": {}, "status": {}}]})
    assert group["targets"] == ["10.88.0.5:8080"]
    labels = group["labels"]
    assert labels["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] == "true"
    assert labels["__meta_kubernetes_pod_annotation_prometheus_io_port"] == "8080"
    assert labels["__meta_kubernetes_pod_label_app_kubernetes_io_name"] == "frontend"
    assert labels["__meta_kubernetes_namespace"] == "hotel" and labels["__meta_kubernetes_pod_ready"] == "true"
    assert labels["__meta_kubernetes_pod_node_name"] == "node-a"


def test_pod_without_ports_is_addressed_by_ip_only():
    pod = {**POD, "spec": {"nodeName": "node-a", "containers": [{"name": "app"}]}}
    assert disc.pod_targets({"items": [pod]})[0]["targets"] == ["10.88.0.5"]


def test_node_target_uses_internal_ip_and_node_name():
    nodes = {"items": [{"metadata": {"name": "node-a", "labels": {"kubernetes.io/os": "linux"}},
                        "status": {"addresses": [{"type": "Hostname", "address": "a"},
                                                 {"type": "InternalIP", "address": "192.0.2.1"}]}}]}
    [group] = disc.node_targets(nodes)
    assert group == {"targets": ["192.0.2.1"], "labels": {"__meta_kubernetes_node_name": "node-a",
                                                          "__meta_kubernetes_node_label_kubernetes_io_os": "linux"}}


def test_unchanged_targets_are_not_rewritten(tmp_path):
    path = tmp_path / "pods.json"
    disc.write_atomically(path, [{"targets": ["a"], "labels": {}}])
    first = path.stat().st_mtime_ns
    disc.write_atomically(path, [{"targets": ["a"], "labels": {}}])
    assert path.stat().st_mtime_ns == first
    disc.write_atomically(path, [{"targets": ["b"], "labels": {}}])
    assert '"b"' in path.read_text()
