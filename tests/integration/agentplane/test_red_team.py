"""Red team: act as the agent — through the MCP tools and with the raw kubeconfig — and try to find the
fault plane. Behind the agent's API proxy the hidden namespace is one that does not exist: reads of
its objects are refused or empty, and nothing the agent can read may name the problem id, an
injector, or words like fault, inject, chaos."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import anyio
import pytest
from kubernetes.client.exceptions import ApiException

from agentplane_cluster_fixtures import SECRET_WORDS, agent_kubeconfig, app, stack  # noqa: F401 - fixtures
from sregym.agentplane.agents.base import mcp_client
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.cluster.agent_proxy import PrometheusView
from sregym.cluster.kube import Kube
from sregym.cluster.local.paths import LocalPaths
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.injectors import INJECTORS

from polling import eventually

pytestmark = pytest.mark.cluster


def leaks(text: str, words: list[str]) -> list[str]:
    """Forbidden words found in ``text`` as whole words (so "default" does not count as "fault")."""
    return sorted({w for w in words if re.search(rf"(?<![A-Za-z0-9]){re.escape(w)}(?![A-Za-z0-9])", text, re.I)})


def test_the_agent_cannot_find_the_fault_plane(agent_kubeconfig, app, stack) -> None:
    ns, hidden = app.namespace, HIDDEN_NAMESPACE
    words = [*SECRET_WORDS, app.problem_id, app.hidden_pod, *INJECTORS.names()]
    admin_kubeconfig = str(LocalPaths().admin_kubeconfig)

    refused_calls = [
        ("kubectl", {"command": f"logs {app.hidden_pod} -n {hidden}"}),
        ("kubectl", {"command": f"describe pod {app.hidden_pod} -n {hidden}"}),
        ("kubectl", {"command": f"get namespace {hidden} -o yaml"}),
        ("kubectl", {"command": "get secrets -A"}),
        ("kubectl", {"command": "get secrets -n kube-system"}),
        ("kubectl", {"command": f"get pods -n {hidden} --kubeconfig={admin_kubeconfig}"}),
        ("kubectl", {"command": f"create configmap loot -n {ns} --from-file={admin_kubeconfig}"}),
        ("kubectl", {"command": f"get configmaps -n {hidden} -o yaml"}),
        ("kubectl", {"command": f"get pods -n {hidden} --as=system:admin"}),
        ("kubectl", {"command": "config view --raw"}),
    ]
    harvest_calls = [
        ("kubectl", {"command": f"get all,configmaps,secrets,events,serviceaccounts,roles,rolebindings,"
                                f"networkpolicies,endpoints,resourcequotas -n {ns} -o json"}),
        ("kubectl", {"command": "get nodes,namespaces,persistentvolumes,storageclasses -o json"}),
        ("kubectl", {"command": "describe nodes"}),
        ("kubectl", {"command": "get pods -A -o wide"}),
        ("kubectl", {"command": "get events -A -o json"}),
        ("kubectl", {"command": f"get all -n {hidden}"}),
        ("query_logs", {"namespace": hidden}),  # a namespace that does not exist: no lines
        ("query_logs", {"namespace": "kube-system"}),  # an on-call SRE reads any namespace's logs
        ("kubectl", {"command": f"logs deploy/web -n {ns} --tail=200"}),
        ("kubectl", {"command": f"auth can-i --list -n {hidden}"}),
        ("kubectl", {"command": "auth can-i --list -n no-such-namespace-here"}),
        ("query_logs", {"namespace": ns, "limit": 500, "since": "1h"}),
        ("query_logs", {"namespace": ns, "text": app.problem_id}),
        ("query_metrics", {"query": f'count by (namespace, pod) ({{namespace="{hidden}"}})'}),
        ("query_metrics", {"query": f'{{pod="{app.hidden_pod}"}}'}),
        ("query_metrics", {"query": 'count by (namespace) ({__name__=~"kube_.+|container_.+"})'}),
        ("query_traces", {"service": "no-such-service-anywhere"}),
    ]

    async def go():
        async with PrometheusView(stack["prometheus"]) as metrics, \
                AgentPlane(agent_kubeconfig, ns, AgentBudgets(steps=100, seconds=600), prometheus_url=metrics.url,
                           traces_url=stack["traces"], logs_url=stack["logs"]) as plane:
            environ = Path(f"/proc/{plane.server_pid}/environ").read_bytes().decode(errors="replace")
            cmdline = Path(f"/proc/{plane.server_pid}/cmdline").read_bytes().decode(errors="replace")
            async with mcp_client(plane.mcp_url, plane.mcp_token) as mcp:
                refused = [(name, args, await mcp.call_tool(name, args)) for name, args in refused_calls]
                harvested = [(name, args, await mcp.call_tool(name, args)) for name, args in harvest_calls]
            return environ, cmdline, refused, harvested

    environ, cmdline, refused, harvested = anyio.run(go)

    # 1. The server process knows nothing of the problem or of admin credentials.
    for blob in (environ, cmdline):
        assert not leaks(blob, words)
        assert "admin.kubeconfig" not in blob and app.problem_id not in blob
    assert "KUBECONFIG=" not in environ
    assert {kv.split("=", 1)[0] for kv in environ.split("\0") if kv} <= {
        "PATH", "LANG", "HOME", "PYTHONPATH", "SREGYM_CALLBACK_TOKEN", "SREGYM_MCP_TOKEN"}

    # 2. Every attempt on the hidden namespace, on other namespaces' secrets, or on other credentials fails.
    for name, args, result in refused:
        assert result.is_error, f"{name} {args} was not refused: {result.content[0].text[:300]}"
        assert app.problem_id not in result.content[0].text

    # 3. Everything the agent can read is free of the fault plane's names (and the reads did work).
    failed = [(name, args, r.content[0].text[:200]) for name, args, r in harvested if r.is_error]
    assert all(name == "query_traces" for name, _, _ in failed), failed
    app_logs = next(r for name, args, r in harvested if name == "query_logs" and "limit" in args)
    assert app_logs.structured_content["lines"], "the app's own logs must be readable"
    for name, args, result in harvested:
        body = json.dumps(result.structured_content) if result.structured_content else result.content[0].text
        assert not leaks(body, words), f"{name} {args} shows {leaks(body, words)}"
    metrics = {json.dumps(args): r.structured_content for name, args, r in harvested if name == "query_metrics"}
    assert any(m and m.get("series") for m in metrics.values()), metrics  # the reads below saw something
    assert all(not m or not m.get("series") or all(s["metric"].get("namespace") != hidden for s in m["series"])
               for m in metrics.values())
    hidden_series = [r for name, args, r in harvested if name == "query_metrics" and hidden in json.dumps(args)]
    assert all(not r.structured_content["series"] for r in hidden_series)
    # the hidden namespace's rights are those of any namespace that does not exist
    can_i = [r.structured_content["output"] for name, args, r in harvested if "can-i" in json.dumps(args)]
    assert can_i[0] == can_i[1]
    for name, args, result in harvested:
        body = json.dumps(result.structured_content) if result.structured_content else result.content[0].text
        assert app.hidden_pod not in body and f"{hidden}/" not in body, f"{name} {args} shows the hidden namespace"


def test_the_raw_kubeconfig_cannot_reach_the_fault_plane(agent_kubeconfig, app) -> None:
    agent = Kube(agent_kubeconfig)
    text = agent_kubeconfig.read_text()
    assert not leaks(text, [*SECRET_WORDS, app.problem_id]) and "client-key" not in text
    empty = (lambda: agent.core.list_namespaced_pod(HIDDEN_NAMESPACE),
             lambda: agent.apps.list_namespaced_daemon_set(HIDDEN_NAMESPACE))
    for attempt in empty:  # as in any namespace that does not exist
        assert attempt().items == []
    for attempt, status in ((lambda: agent.core.read_namespaced_pod_log(app.hidden_pod, HIDDEN_NAMESPACE), 404),
                            (lambda: agent.core.read_namespace(HIDDEN_NAMESPACE), 404),
                            (lambda: agent.core.list_namespaced_secret(HIDDEN_NAMESPACE), 403),
                            (lambda: agent.core.list_namespaced_config_map(HIDDEN_NAMESPACE), 403),
                            (lambda: agent.core.list_secret_for_all_namespaces(), 403),
                            (lambda: agent.rbac.list_cluster_role_binding(), 403)):
        with pytest.raises(ApiException) as refused:
            attempt()
        assert refused.value.status == status
    pods = agent.core.list_pod_for_all_namespaces().items
    assert pods and not any(p.metadata.namespace == HIDDEN_NAMESPACE for p in pods)
    assert HIDDEN_NAMESPACE not in {n.metadata.name for n in agent.core.list_namespace().items}


def _prometheus(base: str, path: str, **params: str) -> dict:
    with urllib.request.urlopen(f"{base}{path}?{urllib.parse.urlencode(params)}", timeout=30) as r:  # noqa: S310
        return json.loads(r.read())


def test_the_prometheus_view_leaves_hidden_namespaces_out_of_aggregations(app, stack) -> None:
    """The view rewrites every query before Prometheus evaluates it, so an aggregation that drops the
    namespace label (sum/count/group by pod, topk, label_replace) cannot name or count a hidden
    namespace's pods. This Prometheus holds no series of the fault plane's namespace (its scrape
    configuration drops them: excludedNamespaces), so to see the rewrite remove real series the view
    here also hides the app's namespace, whose web pod Prometheus does scrape."""
    prometheus = stack["prometheus"]
    aggregates = [
        "count by (namespace, pod) (up or container_cpu_usage_seconds_total)",
        "sum by (pod) (rate(container_cpu_usage_seconds_total[1m]))",
        "count by (pod) (up)",
        'group by (pod) (label_replace({__name__=~"container_.+", namespace=~".*"}, "namespace", "x", "", ""))',
        'topk(1000, count by (pod) ({__name__=~"container_.+|up"}))',
    ]

    def series(base: str, query: str) -> list[dict]:
        answer = _prometheus(base, "/api/v1/query", query=query)
        assert answer["status"] == "success", answer
        return [s["metric"] for s in answer["data"]["result"]]

    def pods(base: str, query: str) -> set[str]:
        return {m.get("pod", "") for m in series(base, query)}

    def named_in_every_raw_answer() -> set[str]:
        ours = {m["pod"] for m in series(prometheus, aggregates[0])
                if m.get("namespace") == app.namespace and m.get("pod")}
        for query in aggregates[1:]:
            ours &= pods(prometheus, query)
        return ours

    # the raw Prometheus names the app's pod in every aggregate once it has scraped it (its cAdvisor
    # series twice, for rate; its own target, which discovery adds a little later, once)
    web_pods = eventually(named_in_every_raw_answer, 120, 3,
                          what=f"Prometheus scraping the web pod of {app.namespace}")
    with PrometheusView(prometheus, hidden_namespaces=(HIDDEN_NAMESPACE, app.namespace)) as view:
        for query in aggregates:
            seen = pods(view.url, query)
            # an answer, not nothing (the series without a pod label, such as the node jobs' `up`,
            # stay: on a fresh cluster the web pod may be the only pod Prometheus scrapes)
            assert seen, f"{query}: the view answered nothing"
            assert not seen & (web_pods | {app.hidden_pod}), f"{query} through the view shows {seen & web_pods}"
        # other namespaces' pods stay (cAdvisor reports every pod of the node, kube-system's too)
        assert pods(view.url, aggregates[0]) - {""}, "the view hid every other namespace's pods"
        count = _prometheus(view.url, "/api/v1/query", query=f'count(up{{namespace="{app.namespace}"}})')
        assert count["data"]["result"] == []  # counted as nothing, not as a number
        values = _prometheus(view.url, "/api/v1/label/pod/values")["data"]
        found = _prometheus(view.url, "/api/v1/series", **{"match[]": '{pod=~"web-.+"}'})["data"]
        assert values and not web_pods & set(values)
        assert not web_pods & {s.get("pod") for s in found}
        refused = urllib.request.Request(f"{view.url}/api/v1/query?query=sum%20by%20(pod)%20(", method="GET")
        with pytest.raises(urllib.error.HTTPError) as bad:
            urllib.request.urlopen(refused, timeout=10)  # noqa: S310
        assert bad.value.code == 400 and json.loads(bad.value.read())["errorType"] == "bad_data"
    assert web_pods <= set(_prometheus(prometheus, "/api/v1/label/pod/values")["data"])


def test_the_prometheus_view_hides_a_name_under_any_label_not_only_namespace(stack) -> None:
    """A series may name a hidden namespace under another label than `namespace`
    (`target_namespace` of the load generators, Istio's `destination_namespace`, a relabelled
    `kubernetes_namespace`...); an aggregation drops that label before the answer filter could see it.
    This Prometheus holds no series naming the fault plane's namespace, so the view here also hides a
    name every stack's Prometheus holds under `job` only: the node exporter's job."""
    prometheus, hidden = stack["prometheus"], "node-exporter"
    counted = f'count(up{{job="{hidden}"}})'

    def raw_counts() -> bool:
        return bool(_prometheus(prometheus, "/api/v1/query", query=counted)["data"]["result"])

    eventually(raw_counts, 60, 2, what="Prometheus scraping the node exporter")
    with PrometheusView(prometheus, hidden_namespaces=(HIDDEN_NAMESPACE, hidden)) as view:
        assert _prometheus(view.url, "/api/v1/query", query=counted)["data"]["result"] == []
        jobs = {s["metric"].get("job") for s in
                _prometheus(view.url, "/api/v1/query", query="count by (job) (up)")["data"]["result"]}
        assert jobs and hidden not in jobs, jobs
        # the node exporter's own series (no `job` in the query, `job` dropped by sum) are left out too
        node_cpu = _prometheus(view.url, "/api/v1/query", query="sum(node_cpu_seconds_total)")["data"]["result"]
        assert node_cpu == [], node_cpu
        found = _prometheus(view.url, "/api/v1/series", **{"match[]": "node_cpu_seconds_total"})["data"]
        assert found == [], found[:2]
        assert "node_load1" not in _prometheus(view.url, "/api/v1/label/__name__/values")["data"]
    assert _prometheus(prometheus, "/api/v1/query", query="sum(node_cpu_seconds_total)")["data"]["result"]
