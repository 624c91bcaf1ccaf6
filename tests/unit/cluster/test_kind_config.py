"""kind-config.yaml stays valid for users with Docker (kind itself cannot run on our machines)."""

from pathlib import Path

import yaml

from sregym.apps.observability import node_ports
from sregym.cluster.providers import KindCluster

CONFIG = Path(__file__).resolve().parents[3] / "kind-config.yaml"


def test_kind_config_has_one_control_plane_and_three_workers_with_node_fault_mounts():
    doc = yaml.safe_load(CONFIG.read_text())
    assert doc["kind"] == "Cluster" and doc["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert [n["role"] for n in doc["nodes"]] == ["control-plane", "worker", "worker", "worker"]
    for node in doc["nodes"]:
        mounts = {m["containerPath"] for m in node["extraMounts"]}
        assert {"/dev", "/lib/modules", "/sys/kernel/btf"} <= mounts


def test_kind_maps_every_observability_node_port_to_loopback():
    doc = yaml.safe_load(CONFIG.read_text())
    mapped = {m["hostPort"] for m in doc["nodes"][0]["extraPortMappings"]}
    assert all(m["listenAddress"] == "127.0.0.1" for m in doc["nodes"][0]["extraPortMappings"])
    assert set(node_ports().values()) <= mapped


def test_kind_provider_commands():
    kind = KindCluster("sregym", CONFIG)
    assert kind.up_command()[:6] == ["kind", "create", "cluster", "--name", "sregym", "--config"]
    assert kind.load_image_command(Path("/x.tar")) == ["kind", "load", "image-archive", "/x.tar", "--name", "sregym"]
