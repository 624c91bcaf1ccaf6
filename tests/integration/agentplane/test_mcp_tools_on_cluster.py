"""The official MCP client calls every tool of the agent plane over Streamable HTTP, on the real cluster."""

from __future__ import annotations

import anyio
import pytest
from kubernetes.client.exceptions import ApiException
from mcp import Client

from agentplane_cluster_fixtures import agent_kubeconfig, app, eventually, open_agent_proxy, stack  # noqa: F401 - fixtures
from sregym.agentplane.agents.base import mcp_client
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.cluster.kube import Kube
from sregym.core.constants import HIDDEN_NAMESPACE

pytestmark = pytest.mark.cluster

ALL_TOOLS = {"kubectl", "query_metrics", "query_logs", "query_traces", "submit_diagnosis", "submit_mitigation"}


async def call_until(mcp: Client, tool: str, args: dict, done, timeout: float = 120):
    """Call ``tool`` until ``done(result)`` (observability backends ingest with a delay)."""
    result = None
    with anyio.move_on_after(timeout):
        while True:
            result = await mcp.call_tool(tool, args)
            if not result.is_error and done(result.structured_content or {}):
                return result
            await anyio.sleep(4)
    return result


def test_official_client_calls_every_tool_over_streamable_http(agent_kubeconfig, app, stack) -> None:
    namespace, marker, service = app.namespace, app.marker, app.service

    async def go():
        async with AgentPlane(agent_kubeconfig, namespace, AgentBudgets(steps=200, seconds=600),
                              prometheus_url=stack["prometheus"], traces_url=stack["traces"],
                              logs_url=stack["logs"]) as plane:
            plane.task(prompt="web is slow", seed=1)
            out = {}
            async with mcp_client(plane.mcp_url, plane.mcp_token) as mcp:
                out["tools"] = {t.name: t for t in (await mcp.list_tools()).tools}
                out["get"] = await mcp.call_tool("kubectl", {"command": ["get", "pods", "-n", namespace, "-o", "wide"]})
                out["scale"] = await mcp.call_tool("kubectl", {"command": f"scale deployment/web --replicas=2 -n {namespace}"})
                out["apply"] = await mcp.call_tool("kubectl", {"command": "apply -f -", "stdin": (
                    f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: tuning, namespace: {namespace}}}\n"
                    "data: {pool: '8'}\n")})
                out["forbidden"] = await mcp.call_tool("kubectl", {"command": ["get", "secrets", "-n", "kube-system"]})
                out["instant"] = await call_until(mcp, "query_metrics", {"query": f'shop_requests_total{{namespace="{namespace}"}}'},
                                                  lambda r: r.get("series"))
                out["range"] = await mcp.call_tool("query_metrics", {"query": "up", "start": "now-5m", "step": "30s"})
                out["logs"] = await call_until(mcp, "query_logs", {"namespace": namespace, "pod": "web", "text": marker,
                                                                    "since": "10m"}, lambda r: r.get("lines"))
                out["traces"] = await call_until(mcp, "query_traces", {"service": service, "errors_only": True,
                                                                        "start": "30m"}, lambda r: r.get("traces"))
                out["diag"] = await mcp.call_tool("submit_diagnosis", {"text": "web is fine", "component": "web"})
                out["mit"] = await mcp.call_tool("submit_mitigation", {})
            with anyio.fail_after(10):
                await plane.mitigation_submitted.wait()
            await anyio.sleep(0.3)
            return out, plane.trajectory()

    out, trajectory = anyio.run(go)
    assert set(out["tools"]) == ALL_TOOLS
    assert out["tools"]["kubectl"].annotations.read_only_hint is False
    assert all(out["tools"][t].annotations.read_only_hint for t in ("query_metrics", "query_logs", "query_traces"))
    assert not out["get"].is_error and "web-" in out["get"].structured_content["output"]
    assert not out["scale"].is_error and "scaled" in out["scale"].structured_content["output"]
    assert not out["apply"].is_error and "configmap/tuning" in out["apply"].structured_content["output"]
    assert out["forbidden"].is_error and "forbidden" in out["forbidden"].content[0].text.lower()
    assert out["instant"].structured_content["series"][0]["value"][1] == "7"
    assert out["range"].structured_content["result_type"] == "matrix"
    assert out["logs"].structured_content["source"] == "log service"
    assert marker in out["logs"].structured_content["lines"][0]["line"]
    assert out["traces"].structured_content["traces"][0]["error_spans"]
    assert not out["diag"].is_error and not out["mit"].is_error
    by_tool = {c.tool for c in trajectory.tool_calls}
    assert by_tool == ALL_TOOLS
    scale = next(c for c in trajectory.tool_calls if c.verb == "scale")
    assert not scale.read_only and scale.error is None and scale.result_bytes > 0
    assert scale.result_text and "scaled" in scale.result_text  # what the agent read, kept for replay and training
    assert trajectory.submission("diagnosis").fields == {"component": "web"}
    assert trajectory.stop_reason == "submitted"


def test_query_logs_without_a_log_service_reads_the_kubernetes_api(agent_kubeconfig, app) -> None:
    namespace, marker = app.namespace, app.marker

    async def go():
        async with AgentPlane(agent_kubeconfig, namespace, AgentBudgets(steps=50, seconds=300)) as plane:
            async with mcp_client(plane.mcp_url, plane.mcp_token) as mcp:
                tools = {t.name for t in (await mcp.list_tools()).tools}
                logs = await call_until(mcp, "query_logs", {"namespace": namespace, "text": marker, "since": "10m"},
                                        lambda r: r.get("lines"))
                hidden = await mcp.call_tool("query_logs", {"namespace": HIDDEN_NAMESPACE})
            return tools, logs, hidden

    tools, logs, hidden = anyio.run(go)
    assert tools == {"kubectl", "query_logs", "submit_diagnosis", "submit_mitigation"}  # no backends: not offered
    assert logs.structured_content["source"] == "kubernetes api"
    assert all(marker in line["line"] for line in logs.structured_content["lines"])
    # behind the proxy the hidden namespace is one that does not exist: no pods, no lines
    assert app.hidden_pod not in hidden.content[0].text
    assert hidden.is_error or not hidden.structured_content.get("lines")


def test_agent_kubeconfig_has_an_sres_rights_and_no_more(agent_kubeconfig, app) -> None:
    namespace = app.namespace
    agent = Kube(agent_kubeconfig)
    assert oct(agent_kubeconfig.stat().st_mode & 0o777) == "0o600"
    assert agent.core.list_namespaced_pod(namespace).items
    agent.apps.patch_namespaced_deployment("web", namespace, {"metadata": {"annotations": {"on-call/note": "checked"}}})
    names = {n.metadata.name for n in agent.core.list_namespace().items}
    assert namespace in names and HIDDEN_NAMESPACE not in names
    assert agent.core.list_node().items
    # an on-call SRE's cluster-wide reads work, and show nothing of the hidden namespace
    pods = agent.core.list_pod_for_all_namespaces().items
    assert any(p.metadata.namespace == namespace for p in pods)
    assert not any(p.metadata.namespace == HIDDEN_NAMESPACE for p in pods)
    assert not any(e.involved_object.namespace == HIDDEN_NAMESPACE
                   for e in agent.core.list_event_for_all_namespaces().items)
    assert agent.core.list_namespaced_pod(HIDDEN_NAMESPACE).items == []  # as in a namespace that does not exist
    with pytest.raises(ApiException) as missing:
        agent.core.read_namespace(HIDDEN_NAMESPACE)
    assert missing.value.status == 404
    denied = [
        lambda: agent.core.list_secret_for_all_namespaces(),
        lambda: agent.core.list_namespaced_secret("kube-system"),
        lambda: agent.core.list_config_map_for_all_namespaces(),
        lambda: agent.core.list_namespaced_config_map(HIDDEN_NAMESPACE),
        lambda: agent.rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": "escalate"}, "subjects": [{"kind": "ServiceAccount", "name": "sre-oncall",
                                                            "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}}),
        lambda: agent.core.delete_namespace(HIDDEN_NAMESPACE),
    ]
    for attempt in denied:
        with pytest.raises(ApiException) as refused:
            attempt()
        assert refused.value.status == 403


def test_revoked_access_stops_working(cluster, app, tmp_path) -> None:
    from sregym.cluster.agent_access import grant_agent_access, revoke_agent_access

    namespace = app.namespace
    grant_agent_access(cluster.kube, namespace, name="sre-temp")
    with open_agent_proxy(cluster, namespace, tmp_path / "agent.kubeconfig", service_account="sre-temp") as proxy:
        path = proxy.kubeconfig
        assert Kube(path).core.list_namespaced_pod(namespace).items is not None
        revoke_agent_access(cluster.kube, namespace, name="sre-temp")
        revoke_agent_access(cluster.kube, namespace, name="sre-temp")  # idempotent

        def refused() -> bool:
            try:
                Kube(path).core.list_namespaced_pod(namespace)
            except ApiException as e:
                return e.status in (401, 403)
            return False

        assert eventually(refused, 30, 1), "the proxy still acts as the account after revoke"
    with pytest.raises(ApiException):
        cluster.kube.core.read_namespaced_service_account("sre-temp", namespace)


def test_react_agent_changes_the_cluster_through_the_tools(cluster, agent_kubeconfig, app) -> None:
    from sregym.agentplane.agents.react import ReactAgent
    from sregym.models import ChatClient
    from sregym.testing.llm_playback import PlaybackServer, raw_tool_call, tool_call

    namespace = app.namespace
    script = [
        tool_call("kubectl", {"command": ["get", "deployments", "-n", namespace]}),
        raw_tool_call("kubectl", '{"command": "scale'),
        tool_call("kubectl", {"command": f"scale deployment/web --replicas=3 -n {namespace}"}),
        tool_call("submit_diagnosis", {"text": "web had too few replicas for the load"}),
        tool_call("submit_mitigation", {}),
    ]

    async def go():
        async with AgentPlane(agent_kubeconfig, namespace, AgentBudgets(steps=10, seconds=300)) as plane:
            task = plane.task(prompt="web is slow", seed=3)
            result = await plane.run_agent(ReactAgent(client=ChatClient(llm.base_url, "scripted")), task)
            await anyio.sleep(0.3)
            return result, plane.trajectory(result)

    with PlaybackServer(script) as llm:
        result, trajectory = anyio.run(go)
        listing = llm.chat_requests[1].json["messages"][-1]["content"]
    assert result.stop_reason == "submitted" and trajectory.invalid_actions == 1
    assert "web" in listing  # the model read the real deployment list
    assert cluster.kube.apps.read_namespaced_deployment("web", namespace).spec.replicas == 3
    assert [c.verb for c in trajectory.tool_calls if c.tool == "kubectl"] == ["get", "scale"]
