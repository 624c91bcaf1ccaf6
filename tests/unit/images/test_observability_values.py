"""What the observability deployer passes to its chart and the URLs it hands out (no cluster)."""

from pathlib import Path

from sregym.apps import observability
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.images import image_tag
from sregym.core.constants import HIDDEN_NAMESPACE, OBSERVABILITY_NAMESPACE


def test_install_pins_each_image_to_its_input_hash_and_hides_the_fault_plane():
    values = observability.install_values()
    assert values["images"]["traceStore"] == {"name": "trace-store", "tag": image_tag("trace-store")}
    assert set(values["images"]) == set(observability.IMAGES)
    assert values["excludedNamespaces"] == [HIDDEN_NAMESPACE]
    assert len(values["sregym"]["chartHash"]) == 16
    assert observability.install_values() == values  # stable: a healthy release is reused


def test_on_kind_the_conductor_uses_port_forwards_not_the_loopback_node_ports(monkeypatch):
    """kind's four nodes are Docker containers, none of them this host: NodePort traffic through
    Docker's port mapping reaches the stack from a node's address, which the fence refuses. So the
    conductor opens port-forwards (tests/unit/apps/test_observability_reach.py) and the loopback
    NodePorts are not what it hands out."""
    from types import SimpleNamespace

    from sregym.cluster import in_cluster

    for env in ("SREGYM_PROMETHEUS_URL", "SREGYM_TRACES_URL", "SREGYM_LOGS_URL", "SREGYM_OTLP_URL"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda *a: None)
    nodes = [SimpleNamespace(status=SimpleNamespace(addresses=[SimpleNamespace(type="InternalIP", address=a)]))
             for a in ("192.0.2.2", "192.0.2.3", "192.0.2.4", "192.0.2.5")]
    kind = ClusterHandle("sregym", "kind", Path("/nonexistent/kubeconfig"))
    kind.__dict__["kube"] = SimpleNamespace(core=SimpleNamespace(list_node=lambda: SimpleNamespace(items=nodes)))
    assert observability.reach(kind) == "port-forwards"
    monkeypatch.setattr(observability, "forwarded_urls",
                        lambda cluster, names, progress: {n: f"http://127.0.0.1:{41000 + i}" for i, n in enumerate(names)})
    urls = observability.endpoints(kind)
    ports = observability.node_ports()
    assert urls["prometheus"] == "http://127.0.0.1:41000" != f"http://127.0.0.1:{ports['prometheus']}"
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
