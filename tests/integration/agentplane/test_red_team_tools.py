"""Red team on the tools themselves, live: acting as the agent through the real MCP server (started by the
agent plane, reached with the official MCP client) on the real cluster, try every form that would make the
tool's kubectl read, fetch or write a file on the host that runs it, print credentials, flood the server's
memory, or reach another cell's tools. Each must fail.

Found live before the fix: ``get -Rf FILE.json`` printed the host file in kubectl's decode error, and
``get pods --profile=cpu --profile-output=PATH`` wrote PATH on the host as root.
"""

from __future__ import annotations

import http.server
import json
import secrets
import threading
import time
import uuid
from pathlib import Path

import anyio
import httpx
import pytest
import yaml
from kubernetes import client
from mcp import MCPError

from sregym.agentplane.agents.base import mcp_client
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from live import agent_kubeconfig_for

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def agent_namespace(cluster, tmp_path_factory):
    """A fresh namespace with the agent's RBAC-limited kubeconfig (no app needed: the tools are the target)."""
    namespace = f"tools-{uuid.uuid4().hex[:6]}"
    cluster.kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    with agent_kubeconfig_for(cluster, namespace, tmp_path_factory.mktemp("agent")) as kubeconfig:
        yield namespace, kubeconfig
    cluster.kube.core.delete_namespace(namespace)


class Counting(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        Counting.hits.append(self.path)
        body = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def call_all(kubeconfig: Path, namespace: str, calls: list[dict]) -> tuple[list, AgentPlane]:
    async def go():
        async with AgentPlane(kubeconfig, namespace, AgentBudgets(steps=200, seconds=600)) as plane:
            async with mcp_client(plane.mcp_url, plane.mcp_token) as mcp:
                results = []
                for args in calls:
                    started = time.monotonic()
                    results.append((args, await mcp.call_tool("kubectl", args), time.monotonic() - started))
            return results, plane

    return anyio.run(go)


def leaf(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_no_flag_form_reads_fetches_or_writes_host_files(agent_namespace, tmp_path: Path) -> None:
    namespace, kubeconfig = agent_namespace
    marker = f"host-secret-{secrets.token_hex(8)}"
    secret = tmp_path / "host-secret.json"
    secret.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": marker},
                                  "data": {"secret": marker}}) + "\n" + marker)
    out = tmp_path / "written"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/manifest.yaml"
    f = str(secret)
    reads = [
        ["get", "-Rf", f], ["get", "-fR", f], [f"-Rf{f}", "get"], ["get", f"-f{f}"], ["get", f"-f={f}"],
        ["get", f"--filename={f}"], ["get", "--filename", f], ["get", "-f", f, "-R"], ["apply", "-f", f],
        ["apply", "--filename", url], ["create", "-f", url], ["apply", "-k", str(tmp_path)],
        ["get", "pods", "-n", namespace, "-o", f"go-template-file={f}"], ["get", "pods", "-n", namespace, "-o",
                                                                           f"templatefile={f}"],
        ["get", "pods", "-n", namespace, f"-ojsonpath-file={f}"], ["get", "pods", "-n", namespace,
                                                                    f"--output=custom-columns-file={f}"],
        ["get", "pods", "-n", namespace, "-o", "go-template", "--template", f],
        ["create", "configmap", "loot", "-n", namespace, f"--from-file={f}"],
        ["create", "configmap", "loot", "-n", namespace, f"--from_file={f}"],
        ["create", "secret", "generic", "loot", "-n", namespace, "--from-env-file", f],
        ["create", "secret", "tls", "loot", "-n", namespace, f"--cert={f}", f"--key={f}"],
        ["patch", "configmap", "x", "-n", namespace, f"--patch-file={f}"],
        ["debug", "pod/x", "-n", namespace, "--image=busybox", f"--custom={f}"],
        ["get", "pods", "-n", namespace, f"--kubeconfig={f}"], ["get", "pods", "-n", namespace, f"--kuberc={f}"],
        ["get", "pods", "-n", namespace, f"--certificate-authority={f}"],
        ["get", "--raw", url], ["get", "pods", "-n", namespace, "-s", url.rsplit("/", 1)[0]],
    ]
    writes = [
        ["get", "pods", "-n", namespace, "--profile=cpu", f"--profile-output={out}-1"],
        ["--profile", "heap", "--profile-output", f"{out}-2", "get", "pods", "-n", namespace],
        ["get", "pods", "-n", namespace, f"--cache-dir={out}-3"],
        ["cluster-info", "dump", f"--output-directory={out}-4"],
        ["get", "pods", "-n", namespace, "--", f"--profile-output={out}-5"],  # after --: a resource name, not a flag
    ]
    results, _ = call_all(kubeconfig, namespace, [{"command": c, "stdin": ""} for c in reads + writes])
    server.shutdown()
    for args, result, _ in results:
        assert result.is_error, f"{args['command']} was accepted: {text_of(result)[:300]}"
        assert marker not in text_of(result), f"{args['command']} printed the host file"
    assert Counting.hits == [], "kubectl fetched a URL from the tool host"
    assert not list(tmp_path.glob("written*")), "kubectl wrote a file on the tool host"
    # the refusals tell the agent what to do instead
    by_command = {json.dumps(a["command"]): text_of(r) for a, r, _ in results}
    assert "`-f -`" in by_command[json.dumps(["get", "-fR", f])]
    assert "profiling writes files" in by_command[json.dumps(writes[0])]


def test_verbose_kubectl_does_not_print_the_agents_token(agent_namespace) -> None:
    namespace, kubeconfig = agent_namespace
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    results, plane = call_all(kubeconfig, namespace, [{"command": ["get", "pods", "-n", namespace, "-v", "9"]},
                                                      {"command": f"get configmaps -n {namespace} --v=10"}])
    for args, result, _ in results:
        text = text_of(result)
        assert "GET https://" in text or "curl" in text, text[:500]  # the verbose log is there...
        assert token not in text and token[-20:] not in text  # ...with the bearer token masked
        assert plane.mcp_token not in text


def test_a_huge_output_is_cut_while_it_is_read(agent_namespace) -> None:
    namespace, kubeconfig = agent_namespace
    results, _ = call_all(kubeconfig, namespace, [{"command": ["get", "--raw", "/openapi/v2"]},
                                                  {"command": ["api-versions"]}])
    (_, huge, took), (_, small, _) = results
    assert huge.structured_content["truncated"] is True and not huge.is_error
    assert "kubectl was stopped there" in huge.structured_content["output"] and took < 30
    assert len(huge.structured_content["output"]) < 16000 + 500
    assert small.structured_content["truncated"] is False and "apps/v1" in small.structured_content["output"]


def test_cells_cannot_reach_each_others_tools(agent_namespace) -> None:
    namespace, kubeconfig = agent_namespace

    async def go():
        async with AgentPlane(kubeconfig, namespace) as a, AgentPlane(kubeconfig, namespace) as b:
            statuses = {}
            async with httpx.AsyncClient(timeout=10) as http:
                for name, headers in (("none", {}), ("other cell", {"Authorization": f"Bearer {b.mcp_token}"}),
                                      ("own", {"Authorization": f"Bearer {a.mcp_token}"})):
                    response = await http.post(a.mcp_url, headers={
                        **headers, "Accept": "application/json, text/event-stream"}, json={
                        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                            "protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "other-cell", "version": "0"}}})
                    statuses[name] = response.status_code
            with pytest.raises(BaseException) as crossed:
                async with mcp_client(a.mcp_url, b.mcp_token) as mcp:
                    await mcp.call_tool("kubectl", {"command": f"delete configmaps --all -n {namespace}"})
            assert isinstance(leaf(crossed.value), MCPError)  # the SDK's report of the 401
            async with mcp_client(a.mcp_url, a.mcp_token) as mcp:
                own = await mcp.call_tool("kubectl", {"command": f"get configmaps -n {namespace}"})
            await anyio.sleep(0.3)
            return statuses, own, [c.arguments for c in a.tool_calls]

    statuses, own, recorded = anyio.run(go)
    assert statuses == {"none": 401, "other cell": 401, "own": 200}
    assert not own.is_error
    assert recorded == [{"command": f"get configmaps -n {namespace}"}]  # the other cell's delete never ran
