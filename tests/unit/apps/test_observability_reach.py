"""How the conductor reaches the observability stack: the NodePorts from the cluster's only node,
the Services from a pod, and from any other host (a workstation driving kind or a lab cluster)
port-forwards of its own on loopback, opened on first use, never handed to a pod, stopped at exit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sregym.apps import observability
from sregym.cluster import in_cluster
from sregym.core.constants import OBSERVABILITY_NAMESPACE

ENVS = ("SREGYM_PROMETHEUS_URL", "SREGYM_TRACES_URL", "SREGYM_LOGS_URL", "SREGYM_OTLP_URL")
CLUSTER_IPS = {"prometheus": "10.96.0.9", "jaeger-query": "10.96.0.16", "log-query": "10.96.0.8",
               "jaeger-collector": "10.96.0.43"}


class FakeForward:
    """Stands for a kubectl process: each start takes the next port, unless it kept one."""

    started: list[FakeForward] = []
    next_port = 41000

    def __init__(self, cluster, namespace, service, service_port):
        self.namespace, self.service, self.service_port = namespace, service, service_port
        self.port, self.pid, self.running = 0, None, False

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def alive(self):
        return self.running

    def start(self):
        if not self.port:
            FakeForward.next_port += 1
            self.port = FakeForward.next_port
        self.running, self.pid = True, 4000 + self.port
        FakeForward.started.append(self)
        return self.url

    def stop(self):
        self.running = False


@pytest.fixture
def workstation(monkeypatch):
    """A host that is not the cluster's node and not a pod, no SREGYM_*_URL set."""
    for env in ENVS:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(observability, "conductor_is_the_node", lambda cluster: False)
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda *a: None)
    monkeypatch.setattr(observability, "PortForward", FakeForward)
    monkeypatch.setattr(observability.atexit, "register", lambda f: registered.append(f))
    registered: list = []
    FakeForward.started = []
    services = SimpleNamespace(read_namespaced_service=lambda name, ns: SimpleNamespace(
        spec=SimpleNamespace(cluster_ip=CLUSTER_IPS[name])))
    cluster = SimpleNamespace(kube=SimpleNamespace(core=services), provider="kind",
                              kubeconfig="/home/me/.kube/config", context="kind-sregym")
    yield SimpleNamespace(cluster=cluster, atexit=registered)
    observability.close_port_forwards()


def test_each_place_the_conductor_runs_reaches_the_stack_its_own_way(monkeypatch):
    cluster = SimpleNamespace()
    monkeypatch.setattr(observability, "conductor_is_the_node", lambda c: True)
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda *a: None)
    assert observability.reach(cluster) == "node"
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda *a: "sregym-nightly")
    assert observability.reach(cluster) == "node"  # a pod in the only node's network
    monkeypatch.setattr(observability, "conductor_is_the_node", lambda c: False)
    assert observability.reach(cluster) == "services"
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda *a: None)
    assert observability.reach(cluster) == "port-forwards"


def test_a_workstation_opens_one_forward_per_endpoint_once_and_stops_them_at_exit(workstation):
    urls = observability.endpoints(workstation.cluster)
    opened = {f.service: f for f in FakeForward.started}
    assert {name: (f.namespace, f.service_port) for name, f in opened.items()} == {
        "prometheus": (OBSERVABILITY_NAMESPACE, 9090), "jaeger-query": (OBSERVABILITY_NAMESPACE, 16686),
        "log-query": (OBSERVABILITY_NAMESPACE, 8080), "jaeger-collector": (OBSERVABILITY_NAMESPACE, 4318)}
    assert urls["prometheus"] == opened["prometheus"].url and urls["prometheus"].startswith("http://127.0.0.1:")
    assert urls["traces"] == opened["jaeger-query"].url
    assert urls["logs"] == opened["log-query"].url
    assert urls["otlp_host_url"] == opened["jaeger-collector"].url + "/v1/traces"
    assert urls["otlp_traces_url"] == observability.IN_CLUSTER_OTLP  # the apps send spans in the cluster
    assert observability.endpoints(workstation.cluster) == urls  # the same forwards, not new ones
    assert len(FakeForward.started) == 4
    assert workstation.atexit == [observability.close_port_forwards]
    observability.close_port_forwards()
    assert not any(f.alive() for f in opened.values())


def test_a_forward_whose_kubectl_exited_is_opened_again_on_its_port(workstation):
    urls = observability.endpoints(workstation.cluster)
    prometheus = next(f for f in FakeForward.started if f.service == "prometheus")
    prometheus.running = False  # its pod was replaced: kubectl exits
    assert observability.endpoints(workstation.cluster)["prometheus"] == urls["prometheus"]
    assert prometheus.alive() and len(FakeForward.started) == 5


def test_an_endpoint_the_user_names_gets_no_forward(workstation, monkeypatch):
    monkeypatch.setenv("SREGYM_PROMETHEUS_URL", "http://127.0.0.1:9090/")
    urls = observability.endpoints(workstation.cluster)
    assert urls["prometheus"] == "http://127.0.0.1:9090"
    assert "prometheus" not in {f.service for f in FakeForward.started}
    for env in ENVS:
        monkeypatch.setenv(env, "http://lab.example:1")
    FakeForward.started = []
    observability.close_port_forwards()
    observability.endpoints(workstation.cluster)
    assert FakeForward.started == []


def test_the_sandboxed_tool_server_is_never_handed_a_forward_of_this_host(workstation):
    """A forward is on the conductor's loopback: in a pod that address is the pod's own, and the
    forward itself must stay this host's. The tool server gets the Service's address, which the
    fence judges (it admits the tool server, not an agent pod); other URLs pass unchanged."""
    urls = observability.endpoints(workstation.cluster)
    assert observability.for_pods(workstation.cluster, urls["traces"]) == "http://10.96.0.16:16686"
    assert observability.for_pods(workstation.cluster, urls["logs"] + "/") == "http://10.96.0.8:8080"
    assert observability.for_pods(workstation.cluster, "http://10.244.0.1:30686") == "http://10.244.0.1:30686"
    assert observability.for_pods(workstation.cluster, None) is None
    assert not observability.is_port_forward("http://10.96.0.16:16686")


def test_the_agent_session_hands_the_tool_server_only_pod_addresses():
    """The conductor passes the app's trace and log URLs through for_pods before the agent plane
    sees them (the Prometheus view, on this host, is what the plane gets for metrics)."""
    import inspect

    from sregym.conductor import agent

    source = inspect.getsource(agent.agent_session)
    assert "for_pods(cluster, app.traces_url)" in source and "for_pods(cluster, app.logs_url)" in source
    assert "traces_url=app.traces_url" not in source and "logs_url=app.logs_url" not in source


def test_readiness_reopens_a_silent_forward_and_reports_one_that_cannot_start(workstation, monkeypatch):
    """A forward to a pod that a rollout replaced stops answering: the readiness check stops it, so
    its next round opens it anew (to a live pod); a forward that cannot start yet (no pod running)
    is one more reason to wait, not a traceback."""
    from sregym.core.errors import ClusterError

    monkeypatch.setattr(observability, "_workloads_ready", lambda cluster: [])
    monkeypatch.setattr(observability, "_answers", lambda url: not url.endswith("/-/ready"))
    problems = observability.problems(workstation.cluster)
    assert len(problems) == 1 and problems[0].startswith("prometheus does not answer at http://127.0.0.1:")
    prometheus = next(f for f in FakeForward.started if f.service == "prometheus")
    assert not prometheus.alive()
    monkeypatch.setattr(observability, "_answers", lambda url: True)
    assert observability.problems(workstation.cluster) == []
    assert prometheus.alive()

    def refuse(self):
        raise ClusterError("kubectl port-forward to svc/prometheus did not start: pod is not running")

    prometheus.running = False
    monkeypatch.setattr(FakeForward, "start", refuse)
    assert observability.problems(workstation.cluster) == [
        "kubectl port-forward to svc/prometheus did not start: pod is not running"]
