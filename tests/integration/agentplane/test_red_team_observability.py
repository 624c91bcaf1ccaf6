"""Red team on the grader's observability services. Acting as the agent (its own kubeconfig, through
its API proxy, in an app namespace under Pod Security ``baseline``), create a Deployment (the agent
may create workloads, not bare pods) whose pod tries
Prometheus's own API (dropped targets of the hidden namespace, the scrape configuration), the trace
store's query API and the log query at every address a pod has for them: the Service's DNS name and
ClusterIP, each pod's IP, and <node IP>:<NodePort>. Every one must be refused at the TCP level
(charts/observability/templates/network-policies.yaml). Meanwhile the same pod still posts spans to
the OTLP port, the host still queries everything with sregym's own clients (the SLO query, the
readiness checks, the agent's Prometheus view, the trace and log queries), and the sandboxed tool
server still reads traces and logs through the fence.

The unit side (who each policy admits) is tests/unit/apps/test_observability_fence.py.
"""

from __future__ import annotations

import json
import textwrap
import uuid

import anyio
import pytest
from kubernetes.client.exceptions import ApiException

from agentplane_cluster_fixtures import otlp_spans, stack, workbench  # noqa: F401 - fixtures
from sregym.agentplane import observability as tools_backend
from sregym.agentplane.agents.base import mcp_client
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.agentplane.sandbox import Sandbox
from sregym.apps import observability
from sregym.apps.namespace import ensure_app_namespace
from sregym.cluster.prometheus import query_value
from sregym.cluster.agent_proxy import PrometheusView, proxy_listen_host
from sregym.cluster.images import image_ref
from sregym.cluster.kube import Kube
from sregym.core.constants import HIDDEN_NAMESPACE, OBSERVABILITY_NAMESPACE, OWNER_LABEL, OWNER_VALUE

from live import agent_kubeconfig_for
from polling import eventually

pytestmark = pytest.mark.cluster

# What a refused connection looks like (kube-router rejects; another engine may drop). A name that
# does not resolve or an HTTP answer is not a refusal: the test must not pass for the wrong reason.
REFUSED = {"ConnectionRefusedError", "TimeoutError", "ConnectionResetError"}
SETTLE_SECONDS = 60  # a stack deployed a moment ago: the policy engine applies new policies within seconds

# Runs in the agent's pod. Each closed URL is tried until all are refused (bounded by the settle
# time), then twice more; the OTLP export is posted once at the end.
PROBE = textwrap.dedent(r"""
    import concurrent.futures as cf, json, sys, time, urllib.error, urllib.request
    spec = json.loads(sys.argv[1])
    def outcome(request):
        try:
            with urllib.request.urlopen(request, timeout=3) as r:
                return "open: %d %s" % (r.status, r.read(120).decode(errors="replace"))
        except urllib.error.HTTPError as e:  # an HTTP answer: the connection got through
            return "open: HTTP %d" % e.code
        except urllib.error.URLError as e:
            return type(e.reason).__name__ + ": " + str(e.reason)[:80]
        except OSError as e:
            return type(e).__name__ + ": " + str(e)[:80]
    def one_round():
        with cf.ThreadPoolExecutor(16) as pool:
            return dict(zip(spec["closed"], pool.map(outcome, spec["closed"])))
    deadline = time.monotonic() + spec["settle"]
    rounds = [one_round()]
    while any(v.startswith("open") for v in rounds[0].values()) and time.monotonic() < deadline:
        time.sleep(2)
        rounds = [one_round()]
    rounds += [one_round(), one_round()]
    export = urllib.request.Request(spec["otlp"], data=spec["spans"].encode(), method="POST",
                                    headers={"Content-Type": "application/json"})
    out = {"closed": {url: [r[url] for r in rounds] for url in spec["closed"]}, "otlp": outcome(export),
           "password": {url: outcome(url) for url in spec["password"]}}
    print("RESULT " + json.dumps(out), flush=True)
    time.sleep(3600)  # a Deployment's pod: stay up rather than restart and probe again
""")


def targets(cluster) -> list[str]:
    """Every address a pod has for the grader's query services, with a path worth stealing."""
    core, ns = cluster.kube.core, OBSERVABILITY_NAMESPACE
    node, ports = observability.node_address(cluster), observability.node_ports()
    wanted = {  # service -> (port, path)
        "prometheus": (9090, "/api/v1/targets?state=dropped"),
        "jaeger-query": (16686, "/api/services"),
        "log-query": (8080, "/query?namespace=kube-system&since=1h"),
    }
    urls = [f"http://prometheus.{ns}.svc:9090/api/v1/status/config",
            f"http://log-query-peers.{ns}.svc:8080/local?namespace=kube-system",
            f"http://{node}:{ports['prometheus']}/api/v1/targets?state=dropped",
            f"http://{node}:{ports['traces']}/api/services",
            f"http://{node}:{ports['logs']}/query?namespace=kube-system"]
    for service, (port, path) in wanted.items():
        svc = core.read_namespaced_service(service, ns)
        urls += [f"http://{service}.{ns}.svc:{port}{path}", f"http://{svc.spec.cluster_ip}:{port}{path}"]
        selector = ",".join(f"{k}={v}" for k, v in svc.spec.selector.items())
        pods = [p.status.pod_ip for p in core.list_namespaced_pod(ns, label_selector=selector).items if p.status.pod_ip]
        assert pods, f"no pod behind service {service}"
        urls += [f"http://{ip}:{port}{path}" for ip in pods]
    return urls


def node_exporter_urls(cluster) -> list[str]:
    """The raw node exporter at each node's address: it shares the host's network namespace, where no
    NetworkPolicy applies, so its own password is its fence."""
    pods = cluster.kube.core.list_namespaced_pod(OBSERVABILITY_NAMESPACE,
                                                label_selector="app.kubernetes.io/name=node-exporter").items
    hosts = {p.status.host_ip for p in pods if p.status.host_ip} | {observability.node_address(cluster)}
    assert pods and hosts, "no node-exporter pod"
    return [f"http://{host}:9100{path}" for host in sorted(hosts) for path in ("/metrics", "/")]


@pytest.fixture(scope="module")
def attack(cluster, stack, tmp_path_factory):
    """An app namespace as deploys make it, the agent's kubeconfig for it, and what the agent's
    probe pod saw: (namespace, kubeconfig, span service, results)."""
    if not observability.conductor_is_the_node(cluster):
        pytest.skip("this host reaches the stack's NodePorts through the fence only as the cluster's only node "
                    "(sregym.apps.observability.conductor_is_the_node); elsewhere it needs port-forwards")
    kube = cluster.kube
    fence = {p.metadata.name for p in kube.networking.list_namespaced_network_policy(OBSERVABILITY_NAMESPACE).items}
    assert {"prometheus", "trace-store", "log-query"} <= fence, f"the stack was deployed without its fence: {fence}"
    run = uuid.uuid4().hex[:6]
    ns, service = f"obs-rt-{run}", f"fence-{run}"
    ensure_app_namespace(cluster, ns)
    # the span claims a parallel cell's namespace, to be read by that cell's trace tool
    spans = otlp_spans(service)
    spans["resourceSpans"][0]["resource"]["attributes"].append(
        {"key": "k8s.namespace.name", "value": {"stringValue": VICTIM_NAMESPACE}})
    spec = {"closed": targets(cluster), "settle": SETTLE_SECONDS, "otlp": observability.IN_CLUSTER_OTLP,
            "spans": json.dumps(spans), "password": node_exporter_urls(cluster)}
    labels = {"app": "probe"}
    probe = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "probe", "labels": labels},
             "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                 "metadata": {"labels": labels},
                 "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                     "name": "probe", "image": image_ref("base"), "imagePullPolicy": "Never",
                     "command": ["python3", "-c", PROBE, json.dumps(spec)]}]}}}}

    def result() -> str | None:
        for pod in kube.core.list_namespaced_pod(ns, label_selector="app=probe").items:
            try:
                # a started container that has printed nothing yet has an empty log: the client says None
                log = kube.core.read_namespaced_pod_log(pod.metadata.name, ns) or ""
            except ApiException:  # not started yet
                continue
            return next((x.removeprefix("RESULT ") for x in log.splitlines() if x.startswith("RESULT ")), None)
        return None

    try:
        with agent_kubeconfig_for(cluster, ns, tmp_path_factory.mktemp("agent")) as kubeconfig:
            # the agent's own right (it may create Deployments), through its API proxy
            Kube(kubeconfig).apps.create_namespaced_deployment(ns, probe)
            found = eventually(result, SETTLE_SECONDS + 120, 2, what="the probe's result in its log")
            yield ns, kubeconfig, service, json.loads(found)
    finally:
        try:
            kube.core.delete_namespace(ns)
        except ApiException as e:
            if e.status != 404:
                raise


def test_a_pod_in_the_app_namespace_cannot_query_the_graders_observability(attack) -> None:
    _, _, _, seen = attack
    assert len(seen["closed"]) >= 13  # DNS names, ClusterIPs, pod IPs and NodePorts of all three
    got_through = {url: tries for url, tries in seen["closed"].items() if any(t.startswith("open") for t in tries)}
    assert not got_through, f"the agent's pod reached the grader's services: {got_through}"
    not_refused = {url: tries for url, tries in seen["closed"].items()
                   if any(t.split(":", 1)[0] not in REFUSED for t in tries)}
    assert not not_refused, f"failed for another reason than a refused connection: {not_refused}"
    # the pod resolves names and reaches the stack where it should: its spans go in
    assert seen["otlp"].startswith("open: 200"), seen["otlp"]


@pytest.mark.xfail(strict=True, reason=(
    "known open (docs/security.md, 'The grader's observability services'): the agent may exec into the "
    "release's own pods and edit its workloads, so no NetworkPolicy rule admits the app's spans and refuses "
    "the agent's; no oracle reads traces, and the store stamps each span with the pod that sent it, so the "
    "agent can only blur its own cell's view (every other cell's trace tool leaves its spans out)"))
def test_spans_the_agent_makes_up_do_not_reach_the_trace_store(attack) -> None:
    """The agent's pod posted a failed span under a service name of its choosing (in the fixture)."""
    _, _, _, seen = attack
    assert not seen["otlp"].startswith("open"), f"the trace store took the agent's span: {seen['otlp']}"


VICTIM_NAMESPACE = "hotel-reservation-p1"


def test_a_span_the_agents_pod_posts_claiming_another_cell_stays_in_the_agents_own_view(stack, attack) -> None:
    """The trace store stamps the span with the agent's namespace and pod, whatever it claimed, so a
    parallel cell's trace tool (scoped to its namespace) never shows it; the agent's own does."""
    ns, _, service, _ = attack
    own = eventually(lambda: tools_backend.query_traces(stack["traces"], service, start="30m", namespace=ns)["traces"],
                     60, 2, what=f"{service}'s span in {ns}'s view")
    assert own[0]["root"]["pod"].startswith("probe-"), own[0]
    with pytest.raises(tools_backend.QueryError, match="no traces"):
        tools_backend.query_traces(stack["traces"], service, start="30m", namespace=VICTIM_NAMESPACE)


def test_a_pod_in_the_app_namespace_cannot_read_the_raw_node_exporter(cluster, attack) -> None:
    """The exporter answers the agent's pod (host network), but only with 401: the password is in a
    Secret the agent cannot read, and Prometheus, which holds it, still scrapes the node."""
    _, kubeconfig, _, seen = attack
    assert seen["password"] and all(r == "open: HTTP 401" for r in seen["password"].values()), seen["password"]
    with pytest.raises(ApiException) as refused:
        Kube(kubeconfig).core.read_namespaced_secret("node-exporter-auth", OBSERVABILITY_NAMESPACE)
    assert refused.value.status == 403


def test_the_host_still_queries_everything_with_sregyms_own_clients(cluster, stack, attack) -> None:
    ns, _, service, _ = attack
    assert observability.problems(cluster) == []  # every endpoint answers this host (the readiness check)
    assert query_value(stack["prometheus"], "count(up)") is not None  # the SLO oracle's query
    # Prometheus holds the node exporter's password: the node's metrics are still scraped
    eventually(lambda: query_value(stack["prometheus"], 'min(up{job="node-exporter"}) == 1'), 60, 2,
               what="Prometheus scraping the node exporter")
    with PrometheusView(stack["prometheus"], listen_host=proxy_listen_host(cluster)) as view:  # the agent's view
        assert tools_backend.query_metrics(view.url, "up")["series"]
    # the span the agent's pod posted is in the store, and the pod's own log lines in the log query
    eventually(lambda: tools_backend.query_traces(stack["traces"], service, start="30m")["traces"], 60, 2,
               what=f"traces of {service} from this host")
    eventually(lambda: tools_backend.query_log_service(stack["logs"], ns, pod="probe", text="RESULT",
                                                       since="30m")["lines"], 60, 2,
               what="the probe's log lines from this host")


def test_the_sandboxed_tool_server_still_reads_traces_and_logs(cluster, stack, workbench, attack) -> None:
    """The tool server pod queries the trace store and the log query itself: the fence admits it by
    its sandbox namespace's label and its component label."""
    ns, kubeconfig, service, _ = attack
    sandbox = Sandbox(cluster.kube, kubeconfig.read_text())

    async def go():
        async with AgentPlane(kubeconfig, ns, AgentBudgets(steps=10, seconds=120), traces_url=stack["traces"],
                              logs_url=stack["logs"], sandbox=sandbox) as plane:
            async with mcp_client(plane.mcp_url, plane.mcp_token) as mcp:
                traces = await mcp.call_tool("query_traces", {"service": service, "start": "30m"})
                logs = await mcp.call_tool("query_logs", {"namespace": ns, "pod": "probe", "text": "RESULT",
                                                          "since": "30m"})
                return traces, logs

    traces, logs = anyio.run(go)
    assert not traces.is_error and traces.structured_content["traces"], traces.content[0].text[:500]
    assert not logs.is_error and logs.structured_content["lines"], logs.content[0].text[:500]


# Runs in a pod of the hidden namespace, as a fault plane's helper would: it logs a marker and posts a
# span under a name of its own to the trace store. An empty export (which stores nothing) is tried
# first until the policy engine has applied the stack's policies, so a just-deployed stack cannot let
# the real span in by a race.
FAULT_PLANE_SPANS = textwrap.dedent(r"""
    import json, sys, time, urllib.error, urllib.request
    spec = json.loads(sys.argv[1])
    def post(body):
        request = urllib.request.Request(spec["otlp"], data=body.encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=3) as r:
                return "open: %d" % r.status
        except urllib.error.HTTPError as e:
            return "open: HTTP %d" % e.code
        except (urllib.error.URLError, OSError) as e:
            return type(getattr(e, "reason", e)).__name__
    deadline = time.monotonic() + spec["settle"]
    while post('{"resourceSpans": []}').startswith("open") and time.monotonic() < deadline:
        time.sleep(2)
    print("RESULT " + post(spec["spans"]), flush=True)
    while True:
        print("injecting fault " + spec["marker"], flush=True)
        time.sleep(2)
""")


@pytest.fixture(scope="module")
def fault_plane_pod(cluster, stack):
    """A pod of the hidden namespace that logs a marker and tried to post a span:
    (service, marker, what its post got)."""
    core, run = cluster.kube.core, uuid.uuid4().hex[:6]
    # names free of the words other red-team tests look for: should a span get in, it stays in the
    # shared store until evicted and must fail this test only
    name, service, marker = f"node-agent-{run}", f"node-agent-{run}", f"fp-marker-{uuid.uuid4().hex}"
    spec = {"otlp": observability.IN_CLUSTER_OTLP, "settle": SETTLE_SECONDS, "marker": marker,
            "spans": json.dumps(otlp_spans(service))}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {OWNER_LABEL: OWNER_VALUE}},
           "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
               "name": "main", "image": image_ref("base"), "imagePullPolicy": "Never",
               "command": ["python3", "-c", FAULT_PLANE_SPANS, json.dumps(spec)]}]}}
    core.create_namespaced_pod(HIDDEN_NAMESPACE, pod)

    def logged() -> str | None:
        try:
            log = core.read_namespaced_pod_log(name, HIDDEN_NAMESPACE) or ""
        except ApiException:
            return None
        result = next((x.removeprefix("RESULT ") for x in log.splitlines() if x.startswith("RESULT ")), None)
        return result if result is not None and marker in log else None

    try:
        yield service, marker, eventually(logged, SETTLE_SECONDS + 120, 2, what="the fault-plane pod's post")
    finally:
        core.delete_namespaced_pod(name, HIDDEN_NAMESPACE, grace_period_seconds=0)


def test_the_sandboxed_tools_show_no_span_or_log_line_of_the_fault_plane(cluster, stack, workbench, attack,
                                                                          fault_plane_pod) -> None:
    """The tool server in the sandbox reads the trace store and the log query without a view of its own:
    what they hold must already be free of the fault plane. Its pods' log lines are left out by the log
    query (EXCLUDE_NAMESPACES); its spans cannot get in (the OTLP port refuses the hidden namespace)."""
    ns, kubeconfig, _, _ = attack
    service, marker, posted = fault_plane_pod
    sandbox = Sandbox(cluster.kube, kubeconfig.read_text())

    async def go():
        async with AgentPlane(kubeconfig, ns, AgentBudgets(steps=10, seconds=120), traces_url=stack["traces"],
                              logs_url=stack["logs"], sandbox=sandbox) as plane:
            async with mcp_client(plane.mcp_url, plane.mcp_token) as mcp:
                return [await mcp.call_tool(name, args) for name, args in (
                    ("query_traces", {"service": service, "start": "30m"}),
                    ("query_logs", {"namespace": HIDDEN_NAMESPACE, "since": "30m"}),
                    ("query_logs", {"namespace": HIDDEN_NAMESPACE, "text": marker, "since": "30m"}))]

    results = anyio.run(go)
    for result in results:
        body = json.dumps(result.structured_content) if result.structured_content else result.content[0].text
        if result.is_error:  # the error repeats the name asked for; what the store holds follows it
            body = body.partition("services with traces:")[2]
        assert service not in body and marker not in body, body[:500]
        assert result.is_error or not result.structured_content.get("traces", result.structured_content.get("lines"))
    assert not posted.startswith("open"), f"the trace store took the fault plane's span: {posted}"
    assert posted.split(":")[0] in REFUSED, posted  # refused, not a name error
