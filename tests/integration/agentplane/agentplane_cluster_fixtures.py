"""Fixtures shared by the agent plane's cluster tests: the observability stack, a small app in its own
namespace (logs a unique marker, serves a metric, sends a trace), a fault-plane workload in the hidden
namespace that shouts the words the agent must never see, and the agent's kubeconfig (for its API
proxy, which acts as the RBAC-limited ServiceAccount and hides the fault plane)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sregym.apps import observability
from sregym.cluster.agent_access import grant_agent_access, revoke_agent_access
from sregym.cluster.agent_proxy import AgentApiProxy, proxy_listen_host, proxy_pki
from sregym.cluster.images import build_images, image_ref
from sregym.core.constants import HIDDEN_NAMESPACE, OBSERVABILITY_NAMESPACE, OWNER_LABEL, OWNER_VALUE

from live import local_socket
from polling import eventually

# Words the fault plane's objects carry and the agent must never find (plus each app's problem id).
SECRET_WORDS = ("chaos", "fault", "inject", "injector", "injection")


@dataclass(frozen=True)
class AppUnderTest:
    namespace: str
    marker: str  # a string the app logs
    service: str  # a service name with a trace in the trace store
    problem_id: str  # what the hidden fault-plane objects are labelled with
    hidden_pod: str

APP_SERVER = """
import http.server, sys, threading, time
MARKER = sys.argv[1]
def chatter():
    n = 0
    while True:
        print(f'GET /search 200 served {MARKER} n={n}', flush=True); n += 1; time.sleep(2)
threading.Thread(target=chatter, daemon=True).start()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'# TYPE shop_requests_total counter\\nshop_requests_total 7\\n'
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(('', 8000), H).serve_forever()
"""


def ensure_namespace(core: client.CoreV1Api, name: str) -> None:
    try:
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except ApiException as e:
        if e.status != 409:
            raise


def otlp_spans(service: str) -> dict:
    """One OTLP/HTTP JSON export: a failed ``GET /search`` span of ``service``, ending now."""
    trace_id, now = uuid.uuid4().hex, time.time_ns()
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"spans": [{"traceId": trace_id, "spanId": uuid.uuid4().hex[:16], "name": "GET /search",
                                   "kind": 2, "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 80_000_000),
                                   "attributes": [{"key": "http.status_code", "value": {"intValue": "500"}}],
                                   "status": {"code": 2}}]}]}]}


POST_SPANS = ("import sys, urllib.request\n"
              "r = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method='POST', "
              "headers={'Content-Type': 'application/json'})\n"
              "print(urllib.request.urlopen(r, timeout=20).status)\n")


def send_trace_from(kube, namespace: str, pod: str, service: str) -> None:
    """Post a span of ``service`` from inside ``pod``, as the app's own code would: the trace store
    stamps spans with the namespace of the pod that sent them, and the agent's trace tool reads only
    its namespace's (a post from this host is attributed to no namespace)."""
    out = kube.kubectl("exec", "-n", namespace, pod, "--", "python3", "-c", POST_SPANS,
                       observability.IN_CLUSTER_OTLP, json.dumps(otlp_spans(service))).stdout
    assert out.strip() == "200", out


@pytest.fixture(scope="module")
def stack(cluster):
    """The observability stack (built and deployed once; reused when already healthy), with the
    URLs this host reaches it at. Nothing is put in os.environ: that would leak into later tests."""
    socket = local_socket(cluster)
    if socket is not None:
        build_images(["base", *observability.IMAGES.values()], provider="local", cluster="default", socket=socket)
    observability.deploy_observability(cluster, timeout=300)
    return observability.endpoints(cluster)


@pytest.fixture(scope="module")
def workbench(cluster):
    """The sandbox's image, built once (cached by input hash; `sregym images build` makes it too)."""
    socket = local_socket(cluster)
    if socket is not None:
        build_images(["workbench"], provider="local", cluster="default", socket=socket)


def _pod(name: str, command: list[str], labels: dict[str, str], annotations: dict[str, str] | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels, annotations=annotations),
        spec=client.V1PodSpec(termination_grace_period_seconds=1, containers=[client.V1Container(
            name="main", image=image_ref("base"), image_pull_policy="Never", command=command,
            ports=[client.V1ContainerPort(container_port=8000)])]))


@pytest.fixture(scope="module")
def app(cluster, stack):
    """A Deployment `web` + Service in a fresh namespace, and a fault-plane pod hidden away."""
    kube, core = cluster.kube, cluster.kube.core
    run = uuid.uuid4().hex[:6]
    APP_NS, PROBLEM_ID, HIDDEN_POD = f"shop-{run}", f"redteam_problem_{run}", f"fault-injector-{run}"
    marker = f"marker-{uuid.uuid4().hex}"
    ensure_namespace(core, APP_NS)
    labels = {"app": "web"}
    template = _pod("web", ["python3", "-c", APP_SERVER, marker], labels,
                    {"prometheus.io/scrape": "true", "prometheus.io/port": "8000", "prometheus.io/path": "/metrics"})
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web", labels=labels),
        spec=client.V1DeploymentSpec(replicas=1, selector=client.V1LabelSelector(match_labels=labels),
                                     template=client.V1PodTemplateSpec(metadata=template.metadata, spec=template.spec)))
    kube.apps.create_namespaced_deployment(APP_NS, deployment)
    core.create_namespaced_service(APP_NS, client.V1Service(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1ServiceSpec(selector=labels, ports=[client.V1ServicePort(port=8000)])))
    # The fault plane's workload: in the hidden namespace, named and talking like the thing to hide.
    ensure_namespace(core, HIDDEN_NAMESPACE)
    hidden = _pod(HIDDEN_POD, ["python3", "-c", "import time\nwhile True:\n print('injecting fault for "
                               f"{PROBLEM_ID} (chaos injector)', flush=True); time.sleep(2)"],
                  {OWNER_LABEL: OWNER_VALUE, "fault": PROBLEM_ID})
    core.create_namespaced_pod(HIDDEN_NAMESPACE, hidden)
    core.create_namespaced_config_map(HIDDEN_NAMESPACE, client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"fault-spec-{run}", labels={OWNER_LABEL: OWNER_VALUE}),
        data={"problem": PROBLEM_ID, "injector": "env_var"}))

    def ready() -> bool:
        pods = core.list_namespaced_pod(APP_NS, label_selector="app=web").items
        return any(p.status.phase == "Running" for p in pods)

    assert eventually(ready, 180, 2), f"the web pod in {APP_NS} did not start"
    service = f"web-{run}"
    web = next(p.metadata.name for p in core.list_namespaced_pod(APP_NS, label_selector="app=web").items
               if p.status.phase == "Running")
    send_trace_from(kube, APP_NS, web, service)
    yield AppUnderTest(APP_NS, marker, service, PROBLEM_ID, HIDDEN_POD)
    core.delete_namespace(APP_NS)
    for delete in (lambda: core.delete_namespaced_pod(HIDDEN_POD, HIDDEN_NAMESPACE, grace_period_seconds=0),
                   lambda: core.delete_namespaced_config_map(f"fault-spec-{run}", HIDDEN_NAMESPACE)):
        try:
            delete()
        except ApiException as e:
            if e.status != 404:
                raise


def open_agent_proxy(cluster, namespace: str, kubeconfig_path: Path, **kwargs) -> AgentApiProxy:
    """The agent's API proxy as a run opens it (on the node's address, with the cluster's CA)."""
    return AgentApiProxy(cluster.kube, namespace, listen_host=proxy_listen_host(cluster), pki=proxy_pki(cluster),
                         kubeconfig_path=kubeconfig_path, **kwargs)


@pytest.fixture(scope="module")
def agent_kubeconfig(cluster, app, tmp_path_factory) -> Path:
    namespace = app.namespace
    grant_agent_access(cluster.kube, namespace)
    with open_agent_proxy(cluster, namespace, tmp_path_factory.mktemp("agent") / "agent.kubeconfig") as proxy:
        yield proxy.kubeconfig
    revoke_agent_access(cluster.kube, namespace, kubeconfig=proxy.kubeconfig)
