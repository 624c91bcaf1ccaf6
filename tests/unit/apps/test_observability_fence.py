"""The observability chart fences the grader's query services (``helm template``, no cluster).

The agent may create pods in its app namespace and exec in them. From such a pod the raw
Prometheus (dropped targets of the hidden namespace, the scrape configuration, the admin API), the
trace store's query API and the log query would answer, so the chart's NetworkPolicies say who may
connect, port by port. These tests read what each policy allows and compare it with exactly the
callers the code has (docs/security.md, "The grader's observability services"):

- nobody but the node reaches Prometheus (the conductor, the oracles and the agent's filtered view
  run on the host; the node needs no rule, see the template);
- the trace store's OTLP ingest is open to every namespace but the hidden ones (every app sends
  spans; no rule could refuse the agent and admit the app, docs/security.md "Spans the agent makes
  up"; the fault plane's pods must not put spans where the agent's tools read them), its query API
  only to the agent's tool server pods;
- the log query only to its peers (each asks the others for their node's lines) and the tool server;
- a conductor in a pod (the nightly suite runner, a suite cell's Job) to all three, by its
  namespace's label and its pod's label together, neither of which the agent can set;
- and every conductor installs the same fenced values, wherever it runs.

The live proof is tests/integration/agentplane/test_red_team_observability.py.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from sregym.agentplane import sandbox
from sregym.apps import observability
from sregym.apps.namespace import pod_security_labels
from sregym.cluster import in_cluster
from sregym.cluster.charts import template
from sregym.core.constants import HIDDEN_NAMESPACE, OBSERVABILITY_NAMESPACE

pytestmark = pytest.mark.usefixtures("helm")  # tests/unit/apps/conftest.py

ANYONE = "anyone"
BUT_HIDDEN = "anyone outside the hidden namespaces"
DEPLOYED = {"excludedNamespaces": [HIDDEN_NAMESPACE]}  # what sregym.apps.observability deploys with
PEERS = "log-query peers"
TOOLS = "the agent's tool server"
CONDUCTOR = "a conductor's pod"


def render(values: dict | None = None) -> list[dict]:
    text = template(observability.CHART, OBSERVABILITY_NAMESPACE, values or {}, release=observability.RELEASE)
    return [d for d in yaml.safe_load_all(text) if d]


def of_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def workloads(docs: list[dict]) -> dict[str, dict]:
    return of_kind(docs, "Deployment") | of_kind(docs, "DaemonSet")


def pod_labels(workload: dict) -> dict[str, str]:
    return workload["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict, labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"only matchLabels is read here: {selector}"
    return selector.get("matchLabels", {}).items() <= labels.items()


def container_ports(workload: dict) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for c in workload["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])}


# -- who a peer is -------------------------------------------------------------------------------
SANDBOX_NS = sandbox.namespace_manifest("sre-workbench-abc123")["metadata"]["labels"]


def sandbox_pod_labels(component: str) -> dict[str, str]:
    return sandbox.pod_manifest("p", component, "sregym/workbench:x", ["true"], secret="s",
                                deadline_seconds=60)["metadata"]["labels"]


# the nightly runner's namespace as the conductor labels it (sregym.cluster.in_cluster.admit_own_namespace)
CONDUCTOR_NS = {**in_cluster.CONDUCTOR_LABELS, "kubernetes.io/metadata.name": "sregym-nightly"}


def cell_pod_labels() -> dict[str, str]:
    from pathlib import Path

    from sregym.conductor.suite_jobs import JobPod, job_manifest
    from sregym.core.problem import Problem
    from sregym.core.settings import RunSettings

    problem = Problem.model_validate({
        "id": "p1", "title": "p1", "alert": "users see errors", "app": {"name": "hotel"},
        "faults": [{"id": "f", "injector": "env_var", "target": {}}],
        "ground_truth": {"root_cause": "a wrong value", "component": "geo", "mechanism": "m"},
        "oracles": {"mitigation": [{"name": "slo"}]}, "difficulty": "easy",
        "tags": {"layer": "application", "fault_family": "config", "failure_mode": "errors"}})
    m = job_manifest(name="suite-cell-0", pod=JobPod(), suite="s", problem=problem, settings=RunSettings(),
                     out_dir=Path("/r"), settings_file=Path("/r/s.json"), state_dir=Path("/r/state"), problems_dirs=[])
    return m["spec"]["template"]["metadata"]["labels"]


def peer_name(peer: dict, docs: list[dict]) -> str:
    """Which caller a NetworkPolicy peer stands for; anything unforeseen fails the test."""
    assert "ipBlock" not in peer, f"an address block lets in whatever comes from it: {peer}"
    pods, namespaces = peer.get("podSelector"), peer.get("namespaceSelector")
    if pods is None and namespaces == {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [HIDDEN_NAMESPACE]}]}:
        return BUT_HIDDEN  # the API server sets that label to the namespace's name; nobody can change it
    log_query = pod_labels(workloads(docs)["log-query"])
    if namespaces is None and pods is not None and selects(pods, log_query):
        assert pods["matchLabels"] == observability_selector("log-query"), peer
        return PEERS
    if namespaces is not None and pods is not None and selects(namespaces, SANDBOX_NS) \
            and selects(pods, sandbox_pod_labels("tools")):
        return TOOLS
    if namespaces is not None and pods is not None and selects(namespaces, CONDUCTOR_NS) \
            and selects(pods, cell_pod_labels()):
        return CONDUCTOR
    raise AssertionError(f"a peer no caller in the code needs: {peer}")


def observability_selector(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": observability.RELEASE}


def allowed(policy: dict, docs: list[dict]) -> dict[int, set[str]]:
    """Port -> who may connect to it, as the policy's ingress rules say (the node always may)."""
    out: dict[int, set[str]] = {}
    for rule in policy["spec"].get("ingress") or []:
        assert rule.get("ports"), f"a rule without ports opens every port: {rule}"
        sources = {peer_name(p, docs) for p in rule["from"]} if rule.get("from") else {ANYONE}
        for port in rule["ports"]:
            assert port.get("protocol", "TCP") == "TCP" and isinstance(port["port"], int), port
            out.setdefault(port["port"], set()).update(sources)
    return out


def policies_selecting(docs: list[dict], workload: dict) -> list[str]:
    return [name for name, p in of_kind(docs, "NetworkPolicy").items()
            if selects(p["spec"]["podSelector"], pod_labels(workload))]


# -- the fence -----------------------------------------------------------------------------------
def test_each_query_service_has_one_ingress_policy_of_its_own_and_egress_stays_free():
    docs = render()
    pods = workloads(docs)
    for name in ("prometheus", "trace-store", "log-query"):
        assert policies_selecting(docs, pods[name]) == [name], name
        policy = of_kind(docs, "NetworkPolicy")[name]
        # Prometheus must keep scraping every namespace: only ingress is fenced
        assert policy["spec"]["policyTypes"] == ["Ingress"], name
    # node-exporter runs in the host's network namespace, where no NetworkPolicy applies (its password
    # fences it: test_the_node_exporter_answers_only_whoever_holds_prometheus_password)
    assert policies_selecting(docs, pods["node-exporter"]) == []


def test_who_may_connect_is_exactly_the_callers_in_the_code():
    docs = render(DEPLOYED)
    policies = of_kind(docs, "NetworkPolicy")
    assert allowed(policies["prometheus"], docs) == {9090: {CONDUCTOR}}
    assert allowed(policies["trace-store"], docs) == {4318: {BUT_HIDDEN}, 16686: {TOOLS, CONDUCTOR}}
    assert allowed(policies["log-query"], docs) == {8080: {PEERS, TOOLS, CONDUCTOR}}


def test_every_port_a_service_reaches_is_decided_by_the_fence():
    """Each Service port of the stack lands on a fenced pod's port whose callers are listed above; a
    new port or Service must be added there on purpose."""
    docs = render(DEPLOYED)
    pods, policies = workloads(docs), of_kind(docs, "NetworkPolicy")
    expected = {("prometheus", 9090): {CONDUCTOR}, ("jaeger-query", 16686): {TOOLS, CONDUCTOR},
                ("jaeger-collector", 4318): {BUT_HIDDEN}, ("log-query", 8080): {PEERS, TOOLS, CONDUCTOR},
                ("log-query-peers", 8080): {PEERS, TOOLS, CONDUCTOR}}
    seen = {}
    for name, service in of_kind(docs, "Service").items():
        selector = {"matchLabels": service["spec"]["selector"]}
        workload = next(w for w in pods.values() if selects(selector, pod_labels(w)))
        [fence] = policies_selecting(docs, workload)
        policy = policies[fence]
        for port in service["spec"]["ports"]:
            target = port["targetPort"]
            number = container_ports(workload)[target] if isinstance(target, str) else target
            seen[(name, port["port"])] = allowed(policy, docs).get(number, set())
    assert seen == expected


def test_the_tool_server_peer_is_the_sandbox_tool_pod_and_nothing_the_agent_can_make():
    policies = of_kind(render(), "NetworkPolicy")
    peers = [p for name in ("trace-store", "log-query") for rule in policies[name]["spec"]["ingress"]
             for p in rule.get("from", []) if "namespaceSelector" in p and "podSelector" in p
             and p["podSelector"] == {"matchLabels": {"app.kubernetes.io/component": "tools"}}]
    assert len(peers) == 2 and peers[0] == peers[1]
    peer = peers[0]
    # the sandbox's own namespace and tool server pod match ...
    assert selects(peer["namespaceSelector"], SANDBOX_NS) and selects(peer["podSelector"], sandbox_pod_labels("tools"))
    # ... an external agent's pod in the same namespace does not, nor does any app namespace
    # (the agent cannot label namespaces, and may create pods only in its app namespace)
    assert not selects(peer["podSelector"], sandbox_pod_labels("agent"))
    app_namespace = {**pod_security_labels(), "kubernetes.io/metadata.name": "hotel-reservation"}
    assert not selects(peer["namespaceSelector"], app_namespace)
    assert not selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": OBSERVABILITY_NAMESPACE})


def test_the_conductor_peer_is_its_labelled_namespace_and_pod_and_nothing_the_agent_can_make():
    """The attack: the agent labels a pod of its app namespace as a conductor (it may create and label
    pods there). Admission needs the namespace's label too, which the agent cannot set."""
    docs = render(observability.install_values())
    peers = [p for name in ("prometheus", "trace-store", "log-query")
             for rule in of_kind(docs, "NetworkPolicy")[name]["spec"]["ingress"] for p in rule.get("from", [])
             if peer_name(p, docs) == CONDUCTOR]
    assert len(peers) == 3 and all(p == peers[0] for p in peers)
    peer = peers[0]
    assert set(peer) == {"namespaceSelector", "podSelector"}  # both, in one peer: an AND, not an OR
    assert selects(peer["namespaceSelector"], CONDUCTOR_NS) and selects(peer["podSelector"], cell_pod_labels())
    assert selects(peer["podSelector"], nightly_runner_pod_labels())
    # the agent's pod, labelled as it likes, in its app namespace or its sandbox: refused
    app_namespace = {**pod_security_labels(), "kubernetes.io/metadata.name": "hotel-reservation"}
    assert not selects(peer["namespaceSelector"], app_namespace)
    assert not selects(peer["namespaceSelector"], SANDBOX_NS)
    assert not selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": HIDDEN_NAMESPACE})
    # the agent cannot put a label on any namespace (nor create one)
    from sregym.cluster.agent_access import cluster_rules, observability_rules
    for rule in observability_rules() + cluster_rules():
        if "namespaces" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule


def nightly_runner_pod_labels() -> dict[str, str]:
    """The labels of the nightly chart's suite runner pod (the CronJob's template)."""
    text = template(observability.CHART.parent / "nightly", "sregym-nightly", {}, release="night")
    [cron] = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "CronJob"]
    return cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]


def test_every_conductor_installs_the_same_fenced_values_wherever_it_runs():
    """There is no switch: a conductor in a pod, on the node or off a multi-node cluster installs the
    one fenced release, so none reinstalls the shared stack with a fence down (or races another over
    a different hash)."""
    import inspect

    assert not inspect.signature(observability.install_values).parameters
    values = observability.install_values()
    assert values["networkPolicy"]["enabled"] is True
    assert of_kind(render(values), "NetworkPolicy").keys() == {"prometheus", "trace-store", "log-query"}


def test_a_conductor_in_a_pod_keeps_the_fence_and_reaches_the_stack_by_its_services(monkeypatch):
    """The attack on issue 15: from a pod, conductor_is_the_node is False, and the deployer used to
    reinstall the shared stack without its NetworkPolicies. Now it labels its own namespace, installs
    the same fenced values (same hash: an up-to-date stack is reused) and uses the Services' names."""
    from sregym.apps import release

    monkeypatch.setattr(in_cluster, "pod_namespace", lambda *a: "sregym-nightly")
    monkeypatch.setattr(observability, "conductor_is_the_node", lambda cluster: False)
    monkeypatch.setattr(release, "installed", lambda *a: ("deployed", "stale"))
    sent: list[dict] = []

    def helm(cluster, *args, input=None, **kw):  # noqa: A002
        sent.append(yaml.safe_load(input))
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(release, "helm", helm)
    patched: list[tuple[str, dict]] = []
    namespace = SimpleNamespace(metadata=SimpleNamespace(labels={"kubernetes.io/metadata.name": "sregym-nightly"}))
    core = SimpleNamespace(read_namespace=lambda name: namespace,
                           patch_namespace=lambda name, body: patched.append((name, body)))
    cluster = SimpleNamespace(kube=SimpleNamespace(core=core), provider="existing")
    assert observability.deploy_observability(cluster, wait=False) is True
    [values] = sent
    assert values["networkPolicy"]["enabled"] is True
    assert values == observability.install_values()  # what the conductor on the node installs
    assert patched == [("sregym-nightly", {"metadata": {"labels": in_cluster.CONDUCTOR_LABELS}})]
    assert of_kind(render(values), "NetworkPolicy").keys() == {"prometheus", "trace-store", "log-query"}
    urls = observability.endpoints(cluster)
    assert urls["prometheus"] == f"http://prometheus.{OBSERVABILITY_NAMESPACE}.svc:9090"
    assert urls["traces"] == f"http://jaeger-query.{OBSERVABILITY_NAMESPACE}.svc:16686"
    assert urls["logs"] == f"http://log-query.{OBSERVABILITY_NAMESPACE}.svc:8080"
    assert urls["otlp_host_url"] == f"http://jaeger-collector.{OBSERVABILITY_NAMESPACE}.svc:4318/v1/traces"


# -- where the fence can hold --------------------------------------------------------------------
def cluster_with_nodes(*addresses: str) -> Any:
    nodes = [SimpleNamespace(status=SimpleNamespace(addresses=[SimpleNamespace(type="InternalIP", address=a)]))
             for a in addresses]
    core = SimpleNamespace(list_node=lambda: SimpleNamespace(items=nodes))
    return SimpleNamespace(kube=SimpleNamespace(core=core), provider="existing")


def test_the_nodeports_answer_through_the_fence_only_where_the_conductor_is_the_only_node():
    """Only there does every connection of the host reach a pod from the pod's own node, which the
    policy engine always admits; elsewhere NodePort traffic arrives from another address, and the
    conductor opens port-forwards of its own or runs in the cluster (the fence stays on)."""
    assert observability.conductor_is_the_node(cluster_with_nodes("127.0.0.1"))
    assert not observability.conductor_is_the_node(cluster_with_nodes("127.0.0.1", "192.0.2.11"))
    assert not observability.conductor_is_the_node(cluster_with_nodes("192.0.2.10"))  # not this host


# -- the node exporter ---------------------------------------------------------------------------
NODE_EXPORTER_USER = "prometheus"


def test_the_node_exporter_answers_only_whoever_holds_prometheus_password():
    """node-exporter runs in the host's network namespace, where no NetworkPolicy applies: a pod the
    agent makes reaches ``<node IP>:9100`` and read the raw exporter (found live). It now demands a
    password that only Prometheus holds: it lives in a Secret of the observability namespace (the
    agent reads no Secret there), mounted into the exporter (as a bcrypt hash) and into Prometheus
    (as a file its scrape reads). No ConfigMap, argument, environment variable or probe carries it,
    since the agent reads all of those."""
    docs = render()
    secret = of_kind(docs, "Secret")["node-exporter-auth"]
    data = secret.get("stringData") or {}
    password, web = data["password"], yaml.safe_load(data["web.yml"])
    assert len(password) >= 24 and password.isalnum()
    users = web["basic_auth_users"]
    assert list(users) == [NODE_EXPORTER_USER] and users[NODE_EXPORTER_USER].startswith("$2")  # bcrypt
    assert password not in data["web.yml"]

    exporter = workloads(docs)["node-exporter"]["spec"]["template"]["spec"]
    [container] = exporter["containers"]
    [web_arg] = [a for a in container["args"] if a.startswith("--web.config.file=")]
    web_path = web_arg.split("=", 1)[1]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in exporter["volumes"]}
    [auth] = [name for name, v in volumes.items() if v.get("secret", {}).get("secretName") == "node-exporter-auth"]
    assert web_path.startswith(mounts[auth]["mountPath"].rstrip("/") + "/")
    assert set(container["readinessProbe"]) & {"tcpSocket"}, "an HTTP probe would need the password in the spec"

    prometheus = workloads(docs)["prometheus"]["spec"]["template"]["spec"]
    config = yaml.safe_load(of_kind(docs, "ConfigMap")["prometheus-config"]["data"]["prometheus.yml"])
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "node-exporter"]
    assert job["basic_auth"]["username"] == NODE_EXPORTER_USER and "password" not in job["basic_auth"]
    password_file = job["basic_auth"]["password_file"]
    [server] = [c for c in prometheus["containers"] if c["name"] == "prometheus"]
    mounted = {m["mountPath"].rstrip("/"): m["name"] for m in server["volumeMounts"]}
    holder = mounted[password_file.rsplit("/", 1)[0]]
    assert {v["name"]: v for v in prometheus["volumes"]}[holder]["secret"]["secretName"] == "node-exporter-auth"

    readable = yaml.safe_dump([d for d in docs if d["kind"] != "Secret"])
    assert password not in readable and users[NODE_EXPORTER_USER] not in readable


def test_the_agent_reads_no_secret_of_the_observability_namespace():
    from sregym.cluster.agent_access import cluster_rules, observability_rules
    for rule in observability_rules() + cluster_rules():
        if "" in rule["apiGroups"]:
            assert "secrets" not in rule["resources"] and "*" not in rule["resources"], rule


def test_the_fault_planes_pods_cannot_post_spans_where_the_agents_tools_read_them():
    """The sandboxed tool server reads the raw trace store: what it holds must already be free of the
    fault plane, so the OTLP port admits every namespace except the hidden ones (and the node)."""
    policy = of_kind(render(DEPLOYED), "NetworkPolicy")["trace-store"]
    otlp = [rule for rule in policy["spec"]["ingress"] if {p["port"] for p in rule["ports"]} == {4318}]
    assert len(otlp) == 1 and otlp[0].get("from"), f"the OTLP port admits the hidden namespace: {otlp}"
    [peer] = otlp[0]["from"]
    assert peer == {"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [HIDDEN_NAMESPACE]}]}}
