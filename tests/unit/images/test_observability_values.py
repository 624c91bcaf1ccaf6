"""What the observability deployer passes to its chart and the URLs it hands out (no cluster)."""

from pathlib import Path

from sregym.apps import observability
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.images import image_tag
from sregym.core.constants import HIDDEN_NAMESPACE, OBSERVABILITY_NAMESPACE

KIND = ClusterHandle("sregym", "kind", Path("/nonexistent/kubeconfig"))


def test_install_pins_each_image_to_its_input_hash_and_hides_the_fault_plane():
    values = observability.install_values()
    assert values["images"]["traceStore"] == {"name": "trace-store", "tag": image_tag("trace-store")}
    assert set(values["images"]) == set(observability.IMAGES)
    assert values["excludedNamespaces"] == [HIDDEN_NAMESPACE]
    assert len(values["sregym"]["chartHash"]) == 16
    assert observability.install_values() == values  # stable: a healthy release is reused


def test_kind_endpoints_are_loopback_node_ports(monkeypatch):
    for env in ("SREGYM_PROMETHEUS_URL", "SREGYM_TRACES_URL", "SREGYM_LOGS_URL", "SREGYM_OTLP_URL"):
        monkeypatch.delenv(env, raising=False)
    urls = observability.endpoints(KIND)
    ports = observability.node_ports()
    assert urls["prometheus"] == f"http://127.0.0.1:{ports['prometheus']}"
    assert urls["traces"] == f"http://127.0.0.1:{ports['traces']}"
    assert urls["logs"] == f"http://127.0.0.1:{ports['logs']}"
    assert urls["otlp_traces_url"] == f"http://jaeger-collector.{OBSERVABILITY_NAMESPACE}.svc:4318/v1/traces"


def test_environment_overrides_every_url(monkeypatch):
    monkeypatch.setenv("SREGYM_PROMETHEUS_URL", "http://p:1/")
    monkeypatch.setenv("SREGYM_TRACES_URL", "http://t:2")
    monkeypatch.setenv("SREGYM_LOGS_URL", "http://l:3")
    monkeypatch.setenv("SREGYM_OTLP_URL", "http://o:4/")
    existing = ClusterHandle("lab", "existing", Path("/nonexistent/kubeconfig"))
    urls = observability.endpoints(existing)  # no node lookup needed: nothing touches the cluster
    assert (urls["prometheus"], urls["traces"], urls["logs"]) == ("http://p:1", "http://t:2", "http://l:3")
    assert urls["otlp_host_url"] == "http://o:4/v1/traces"
