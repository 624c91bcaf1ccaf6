"""What the agent session hands the sandboxed tool server: a conductor off the cluster's node reaches
the observability stack through port-forwards on its own loopback, which in a pod would be the
pod's own address (and must stay this host's); the tool server is given the Services' addresses.
The session runs for real; its collaborators (the API proxy, the metrics view, the sandbox, the
agent plane, RBAC grants) are stand-ins that record what they are handed."""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from off_the_node import workstation

import sregym.agentplane.plane as plane_module
import sregym.agentplane.sandbox as sandbox_module
import sregym.cluster.agent_access as agent_access
import sregym.cluster.agent_proxy as agent_proxy
from sregym.apps import DeployedApp, observability
from sregym.conductor import agent
from sregym.core.problem import Budgets

NODE = "10.244.0.1"


class Helper:
    """A helper process (the API proxy, the metrics view) as an async context manager."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs, self.pid = args, kwargs, None
        handed.setdefault(type(self).__name__, []).append(self)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        return False


class Proxy(Helper):
    kubeconfig: Path | None = None

    async def __aenter__(self):
        self.kubeconfig = Proxy.kubeconfig
        return self


class MetricsView(Helper):
    url = f"http://{NODE}:40001"


class Plane(Helper):
    server_pid = None
    mcp_url = f"http://{NODE}:40002/mcp"


class SandboxStandIn(Helper):
    pass


handed: dict[str, list[Helper]] = {}


@pytest.fixture
def off_the_node(monkeypatch, tmp_path):
    """A workstation (not the cluster's node, not a pod) whose forwards are open, and the session's
    collaborators replaced by recorders."""
    cluster = workstation(monkeypatch).cluster
    Proxy.kubeconfig = tmp_path / "agent.kubeconfig"
    Proxy.kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    handed.clear()
    monkeypatch.setattr(agent, "ensure_workbench_image", lambda c: None)
    monkeypatch.setattr(agent_access, "grant_agent_access", lambda kube, ns: None)
    monkeypatch.setattr(agent_access, "revoke_agent_access", lambda kube, ns: None)
    monkeypatch.setattr(agent_proxy, "AgentApiProxy", Proxy)
    monkeypatch.setattr(agent_proxy, "PrometheusView", MetricsView)
    monkeypatch.setattr(agent_proxy, "proxy_listen_host", lambda c: NODE)
    monkeypatch.setattr(agent_proxy, "proxy_pki", lambda c: None)
    monkeypatch.setattr(sandbox_module, "Sandbox", SandboxStandIn)
    monkeypatch.setattr(plane_module, "AgentPlane", Plane)
    urls = observability.endpoints(cluster)
    app = DeployedApp(name="shop", namespace="shop", prometheus_url=urls["prometheus"], traces_url=urls["traces"],
                      logs_url=urls["logs"])
    yield SimpleNamespace(cluster=cluster, app=app)
    observability.close_port_forwards()


def open_session(cluster, app) -> None:
    async def main():
        async with agent.agent_session(agent="stand-in", runner=SimpleNamespace(egress=[]), cluster=cluster,
                                       app=app, alert="checkout latency is above its objective",
                                       budgets=Budgets(), forbidden_words=["secret-problem-id"]):
            pass

    anyio.run(main)


def strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


def test_the_tool_server_gets_the_services_addresses_never_a_forward_of_this_host(off_the_node):
    app = off_the_node.app
    assert all(observability.is_port_forward(u) for u in (app.prometheus_url, app.traces_url, app.logs_url))
    open_session(off_the_node.cluster, app)
    (plane,) = handed["Plane"]
    assert plane.kwargs["traces_url"] == "http://10.96.0.16:16686"
    assert plane.kwargs["logs_url"] == "http://10.96.0.8:8080"
    assert plane.kwargs["prometheus_url"] == MetricsView.url  # the filtering view, not Prometheus itself
    (view,) = handed["MetricsView"]
    assert view.args == (app.prometheus_url,)  # the view runs on this host: the forward is its upstream
    for helper in [plane, *handed["SandboxStandIn"]]:  # what reaches the sandbox
        for value in strings([list(helper.args), helper.kwargs]):
            assert not observability.is_port_forward(value), value
            host = urllib.parse.urlsplit(value).hostname if "://" in value else None
            assert host not in ("127.0.0.1", "localhost"), value
