"""How the conductor reaches the observability stack: the NodePorts from the cluster's only node,
the Services from a pod, and from any other host (a workstation driving kind or a lab cluster)
port-forwards of its own on loopback, opened on first use, never handed to a pod, stopped at exit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from off_the_node import ENVS, FakeForward
from off_the_node import workstation as off_the_node

from sregym.apps import observability
from sregym.cluster import in_cluster
from sregym.core.constants import OBSERVABILITY_NAMESPACE


@pytest.fixture
def workstation(monkeypatch):
    """A host that is not the cluster's node and not a pod, no SREGYM_*_URL set."""
    yield off_the_node(monkeypatch)
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


def test_what_was_opened_is_told_to_the_callers_progress_not_printed(workstation, capsys):
    """The CLI shows its progress live: the apps layer tells its caller, which decides how to show it."""
    told: list[str] = []
    urls = observability.endpoints(workstation.cluster, told.append)
    (notice,) = told
    for forward in FakeForward.started:
        assert f"svc/{forward.service}:{forward.service_port} at {forward.url} (pid {forward.pid})" in notice
    assert "sregym cleanup" in notice and urls["prometheus"] in notice
    observability.endpoints(workstation.cluster, told.append)
    assert len(told) == 1  # the same forwards: nothing new to say
    assert capsys.readouterr() == ("", "")


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
