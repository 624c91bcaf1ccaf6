"""The observability stack on the real cluster: Prometheus scrapes pods by annotation and has
container and node series; the trace store takes OTLP and answers Jaeger's API; the log query finds
what a pod printed."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from sregym.apps import observability
from sregym.cluster.images import build_images, image_ref
from polling import eventually

pytestmark = pytest.mark.cluster


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=20) as response:
        return json.load(response)


def post(url: str, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type}, method="POST")
    with urllib.request.urlopen(request, timeout=20) as response:
        return response.status


def prom_query(base: str, expr: str) -> list[dict]:
    return get_json(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")["data"]["result"]


@pytest.fixture(scope="module")
def stack(cluster):
    if cluster.provider == "local":
        socket = cluster.data_dir / "containerd" / "containerd.sock" if cluster.data_dir else None
        build_images(list(observability.IMAGES.values()), provider="local", cluster=cluster.name, socket=socket)
    observability.deploy_observability(cluster, timeout=300)
    return observability.endpoints(cluster)


@pytest.fixture(scope="module")
def workload_ns(cluster):
    """A namespace with a pod that serves metrics (scrape annotations) and prints a unique line."""
    core = cluster.kube.core
    ns = f"obs-{uuid.uuid4().hex[:6]}"
    token = f"marker-{uuid.uuid4().hex}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    server = (
        "import http.server, sys\n"
        f"print('ready {token}', flush=True)\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        body = b'# TYPE sregym_probe_value gauge\\nsregym_probe_value 42\\n'\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "    def log_message(self, *a): pass\n"
        "http.server.HTTPServer(('', 8000), H).serve_forever()\n")
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="metrics-pod", labels={"app.kubernetes.io/name": "metrics-pod"},
                                     annotations={"prometheus.io/scrape": "true", "prometheus.io/port": "8000",
                                                  "prometheus.io/path": "/metrics"}),
        spec=client.V1PodSpec(containers=[client.V1Container(
            name="app", image=image_ref("base"), image_pull_policy="Never", command=["python3", "-c", server],
            ports=[client.V1ContainerPort(container_port=8000)])]))
    core.create_namespaced_pod(ns, pod)
    yield ns, token
    core.delete_namespace(ns)


def test_stack_is_ready_and_reachable_from_the_host(cluster, stack):
    assert observability.observability_ready(cluster)
    assert set(stack) >= {"prometheus", "traces", "logs"}
    assert get_json(stack["prometheus"] + "/api/v1/status/buildinfo")["status"] == "success"


def test_prometheus_scrapes_a_pod_by_annotation(stack, workload_ns):
    ns, _ = workload_ns
    found = eventually(lambda: prom_query(stack["prometheus"], f'sregym_probe_value{{namespace="{ns}"}}'), 150)
    assert found, "the annotated pod was not scraped"
    assert found[0]["value"][1] == "42" and found[0]["metric"]["pod"] == "metrics-pod"
    assert found[0]["metric"]["app_kubernetes_io_name"] == "metrics-pod"


def test_prometheus_has_container_and_node_series(stack):
    # cAdvisor's pod-level cgroup series (a `container` label also needs the kubelet's cAdvisor to
    # reach containerd at its default socket; the pod-level series are there either way)
    container = eventually(lambda: prom_query(
        stack["prometheus"], 'container_memory_working_set_bytes{namespace="observability",pod=~"prometheus-.*"}'))
    assert container and float(container[0]["value"][1]) > 0
    node = eventually(lambda: prom_query(stack["prometheus"], "node_memory_MemAvailable_bytes"))
    assert node and float(node[0]["value"][1]) > 0
    kubelet = eventually(lambda: prom_query(stack["prometheus"], 'up{job="kubelet"} == 1'))
    assert kubelet


def test_trace_store_takes_otlp_and_answers_jaegers_api(stack):
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    now = time.time_ns()
    body = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "itest-checkout"}}]},
        "scopeSpans": [{"spans": [{"traceId": trace_id, "spanId": span_id, "name": "POST /pay", "kind": 2,
                                   "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 120_000_000),
                                   "attributes": [{"key": "http.status_code", "value": {"intValue": "503"}}],
                                   "status": {"code": 2}}]}]}]}
    assert post(stack["otlp_host_url"], json.dumps(body).encode(), "application/json") == 200
    # the same span path over protobuf, from another service, in the same trace
    proto = ExportTraceServiceRequest()
    rs = proto.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "itest-bank"
    span = rs.scope_spans.add().spans.add(trace_id=bytes.fromhex(trace_id), span_id=bytes.fromhex("ab" * 8),
                                          parent_span_id=bytes.fromhex(span_id), name="charge",
                                          start_time_unix_nano=now + 1_000_000, end_time_unix_nano=now + 90_000_000)
    assert span.name == "charge"
    assert post(stack["otlp_host_url"], proto.SerializeToString(), "application/x-protobuf") == 200

    traces = stack["traces"]
    assert {"itest-checkout", "itest-bank"} <= set(get_json(traces + "/api/services")["data"])
    assert get_json(traces + "/api/services/itest-checkout/operations")["data"] == ["POST /pay"]
    params = urllib.parse.urlencode({"service": "itest-checkout", "start": now // 1000 - 1_000_000,
                                     "end": now // 1000 + 1_000_000, "limit": 5, "tags": '{"error":"true"}'})
    found = get_json(f"{traces}/api/traces?{params}")["data"]
    assert [t["traceID"] for t in found] == [trace_id]
    trace = get_json(f"{traces}/api/traces/{trace_id}")["data"][0]
    assert sorted(p["serviceName"] for p in trace["processes"].values()) == ["itest-bank", "itest-checkout"]
    assert len(trace["spans"]) == 2


# Run in a pod with `kubectl exec`: post one failed span of SERVICE, claiming namespace CLAIMED, to URL.
POST_CLAIMING = """
import json, sys, time, urllib.request
url, service, claimed, trace = sys.argv[1:5]
now = time.time_ns()
body = {"resourceSpans": [{"resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": service}},
            {"key": "k8s.namespace.name", "value": {"stringValue": claimed}},
            {"key": "k8s.pod.name", "value": {"stringValue": service + "-7d9f-x"}}]},
        "scopeSpans": [{"spans": [{"traceId": trace, "spanId": trace[:16], "name": "GET /search", "kind": 2,
                                   "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 9000000),
                                   "status": {"code": 2}}]}]}]}
request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
print(urllib.request.urlopen(request, timeout=10).status)
"""


def test_the_trace_store_says_which_pod_sent_a_span_whatever_it_claims(cluster, stack, workload_ns):
    """A pod posts spans claiming another namespace (as an agent's pod would, to be read by a
    parallel cell's trace tool): through the Service the store stamps them with the pod's own
    namespace and name; through the NodePort (masqueraded to the node's address) with none."""
    ns, _ = workload_ns
    pod = eventually(lambda: next((p for p in [cluster.kube.core.read_namespaced_pod("metrics-pod", ns)]
                                   if p.status.phase == "Running"), None), 120, what="the workload pod running")
    service, victim = f"search-{uuid.uuid4().hex[:6]}", "hotel-reservation-p1"
    node_url = f"http://{pod.status.host_ip}:{observability.node_ports()['otlp']}/v1/traces"
    traces = {}
    for path, url in (("service", observability.IN_CLUSTER_OTLP), ("node port", node_url)):
        traces[path] = uuid.uuid4().hex
        out = cluster.kube.kubectl("exec", "-n", ns, "metrics-pod", "--", "python3", "-c", POST_CLAIMING,
                                   url, service, victim, traces[path]).stdout
        assert out.strip() == "200", f"{path}: {out}"

    def process_of(trace_id):
        found = get_json(f"{stack['traces']}/api/traces/{trace_id}")["data"]
        [process] = found[0]["processes"].values()
        return {t["key"]: t["value"] for t in process["tags"]}

    by_service = process_of(traces["service"])
    assert by_service["k8s.namespace.name"] == ns and by_service["k8s.pod.name"] == "metrics-pod", by_service
    assert by_service["sregym.sender"] == "pod" and by_service["claimed.k8s.namespace.name"] == victim
    by_node = process_of(traces["node port"])
    assert "k8s.namespace.name" not in by_node and by_node["sregym.sender"] == "unattributed", by_node
    # what the victim cell's trace tool asks (sregym.agentplane.observability.query_traces, scoped)
    params = urllib.parse.urlencode({"service": service, "lookback": "1h", "tags": json.dumps({"k8s.namespace.name": victim})})
    assert get_json(f"{stack['traces']}/api/traces?{params}")["data"] == []
    health = get_json(f"{stack['traces']}/healthz")
    assert health["attribution"]["lookup_errors"] == 0, health


def test_log_query_finds_a_line_a_pod_printed(stack, workload_ns):
    ns, token = workload_ns
    url = f"{stack['logs']}/query?{urllib.parse.urlencode({'namespace': ns, 'text': token, 'since': '10m'})}"
    found = eventually(lambda: get_json(url)["lines"], 120)
    assert found and found[0]["pod"] == "metrics-pod" and found[0]["container"] == "app"
    assert token in found[0]["line"]


def test_a_conductor_off_the_node_reaches_the_stack_through_port_forwards_it_stops(cluster, stack, monkeypatch):
    """A workstation driving kind or a lab cluster is not the node, so the fence refuses its NodePort
    traffic: sregym opens kubectl port-forwards on loopback (a forward is dialled inside the pod's
    own network, where no policy applies), and each endpoint answers through them with the fence on.
    Here the local cluster stands in for such a cluster by saying this host is not its node."""
    for env in ("SREGYM_PROMETHEUS_URL", "SREGYM_TRACES_URL", "SREGYM_LOGS_URL", "SREGYM_OTLP_URL"):
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setattr(observability, "conductor_is_the_node", lambda c: False)
    assert observability.reach(cluster) == "port-forwards"
    policies = {p.metadata.name for p in cluster.kube.networking.list_namespaced_network_policy(
        observability.OBSERVABILITY_NAMESPACE).items}
    assert {"prometheus", "trace-store", "log-query"} <= policies
    try:
        urls = observability.endpoints(cluster)
        pids = [f.pid for f in observability._forwards.values()]
        assert len(pids) == 4 and all(os.path.exists(f"/proc/{pid}") for pid in pids)
        for name in ("prometheus", "traces", "logs"):
            assert urls[name].startswith("http://127.0.0.1:") and urls[name] != stack[name]
        assert observability.problems(cluster) == []  # every health path answers through a forward
        assert prom_query(urls["prometheus"], "up")
        assert isinstance(get_json(urls["traces"] + "/api/services")["data"], list)
        logs = f"{urls['logs']}/query?{urllib.parse.urlencode({'namespace': 'observability', 'since': '10m'})}"
        assert "lines" in get_json(logs)
        # the sandboxed tool server would be handed the Service's address, not this host's forward
        query = cluster.kube.core.read_namespaced_service("jaeger-query", observability.OBSERVABILITY_NAMESPACE)
        assert observability.for_pods(cluster, urls["traces"]) == f"http://{query.spec.cluster_ip}:16686"
    finally:
        observability.close_port_forwards()
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


# A conductor off the node, as its own process: opens the forwards as the conductor does, says their
# kubectl pids, and waits to be killed.
OFF_NODE_CONDUCTOR = """
import json, sys, time
from pathlib import Path
from sregym.apps import observability
from sregym.cluster.handle import ClusterHandle

cluster = ClusterHandle(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4] or None)
observability.conductor_is_the_node = lambda c: False
urls = observability.endpoints(cluster)
print(json.dumps({"pids": [f.pid for f in observability._forwards.values()], "urls": urls}), flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    """The process runs (a zombie has exited: it holds no port and waits only to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _answers_tcp(url: str) -> bool:
    host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False


def test_the_forwards_of_a_killed_conductor_are_stopped_by_cleanup(cluster, stack, tmp_path):
    """SIGKILL runs no exit handler: the conductor's kubectl port-forwards outlive it (their own
    session, so not even its process group's signal takes them). They were recorded with their
    identity before anything waited on them, so `sregym cleanup` stops exactly those."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SREGYM_PROMETHEUS_URL", "SREGYM_TRACES_URL",
                                                                     "SREGYM_LOGS_URL", "SREGYM_OTLP_URL"))}
    env["SREGYM_STATE"] = str(tmp_path / "state")  # this test's state only: no other run's journal is touched
    argv = [sys.executable, "-c", OFF_NODE_CONDUCTOR, cluster.name, cluster.provider, str(cluster.kubeconfig),
            cluster.context or ""]
    conductor = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    pids: list[int] = []
    try:
        opened = json.loads(conductor.stdout.readline() or "{}")
        pids = opened.get("pids", [])
        assert len(pids) == 4 and all(_running(pid) for pid in pids), opened
        # no connection through them before the kill: kubectl writes a line per connection, and one
        # written after its reader died is a SIGPIPE that ends it (an idle forward lives on)
        conductor.kill()
        conductor.wait(timeout=10)
        time.sleep(1)
        assert all(_running(pid) for pid in pids)  # what a killed conductor leaves
        cleanup = subprocess.run([sys.executable, "-m", "sregym", "cleanup"], env=env, capture_output=True,
                                 text=True, timeout=120)
        assert cleanup.returncode == 0, cleanup.stderr
        assert "stopped 4 helper process(es)" in cleanup.stderr, cleanup.stderr
        assert not any(_running(pid) for pid in pids)
        assert not any(_answers_tcp(opened["urls"][name]) for name in ("prometheus", "traces", "logs"))
        again = subprocess.run([sys.executable, "-m", "sregym", "cleanup"], env=env, capture_output=True, text=True,
                               timeout=120)
        assert again.returncode == 0 and "helper process" not in again.stderr, again.stderr
    finally:
        if conductor.poll() is None:
            conductor.kill()
            conductor.wait()
        conductor.stdout.close()
        for pid in pids:  # only what this test started, by pid, if cleanup did not stop it
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
