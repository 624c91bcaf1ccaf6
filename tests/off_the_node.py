"""A conductor off the cluster's node, for unit tests: not the node, not a pod, no SREGYM_*_URL, so
the observability stack is reached through port-forwards, here stand-ins that take loopback ports."""

from __future__ import annotations

from types import SimpleNamespace

from sregym.apps import observability
from sregym.cluster import in_cluster

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


def workstation(monkeypatch) -> SimpleNamespace:
    """This host as a workstation: ``cluster`` (its Services have :data:`CLUSTER_IPS`) and ``atexit``
    (what was registered to run at exit). Call ``observability.close_port_forwards()`` after."""
    for env in ENVS:
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(observability, "conductor_is_the_node", lambda cluster: False)
    monkeypatch.setattr(in_cluster, "pod_namespace", lambda *a: None)
    monkeypatch.setattr(observability, "PortForward", FakeForward)
    registered: list = []
    monkeypatch.setattr(observability.atexit, "register", registered.append)
    FakeForward.started = []
    services = SimpleNamespace(read_namespaced_service=lambda name, ns: SimpleNamespace(
        spec=SimpleNamespace(cluster_ip=CLUSTER_IPS[name])))
    cluster = SimpleNamespace(kube=SimpleNamespace(core=services), provider="kind", name="lab",
                              kubeconfig="/home/me/.kube/config", context="kind-sregym", data_dir=None)
    return SimpleNamespace(cluster=cluster, atexit=registered)
