"""`sregym mcp serve` for bring-your-own agents: stdio transport through the official MCP client."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters


def test_stdio_server_offers_the_tools_and_logs_calls_and_submissions(tmp_path: Path, agent_kubeconfig: Path) -> None:
    kubeconfig = agent_kubeconfig
    events = tmp_path / "events.jsonl"
    sregym = shutil.which("sregym") or sys.executable
    prefix = [] if sregym != sys.executable else ["-m", "sregym"]
    params = StdioServerParameters(command=sregym, args=[
        *prefix, "mcp", "serve", "--agent-kubeconfig", str(kubeconfig), "-n", "shop", "--transport", "stdio",
        "--steps", "1", "--traces-url", "http://127.0.0.1:1", "--events-file", str(events)])

    async def go():
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            version = await client.call_tool("kubectl", {"command": "version --client"})
            spent = await client.call_tool("kubectl", {"command": "version --client"})
            await client.call_tool("submit_mitigation", {})
            return tools, version, spent

    tools, version, spent = anyio.run(go)
    assert set(tools) == {"kubectl", "query_logs", "query_traces", "submit_diagnosis", "submit_mitigation"}
    assert tools["kubectl"].annotations.read_only_hint is False and tools["kubectl"].annotations.destructive_hint
    assert tools["query_logs"].annotations.read_only_hint and tools["query_traces"].annotations.read_only_hint
    assert tools["submit_mitigation"].annotations.destructive_hint is False
    assert not version.is_error and version.structured_content["verb"] == "version"
    assert spent.is_error and "step budget of 1" in spent.content[0].text
    logged = [json.loads(line) for line in events.read_text().splitlines()]
    assert [e["type"] for e in logged] == ["tool_call", "tool_call", "submission", "tool_call"]
    assert logged[1]["invalid"] and logged[2]["kind"] == "mitigation"
