"""The MCP endpoint answers only its own run's bearer token: none, a wrong one, or another plane's gets 401.

Two planes run side by side as two cells of a parallel suite would; the agent of one tries the other's
tools. No cluster: the agent kubeconfig points at a closed port and `kubectl version --client` needs none.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, MCPError

from sregym.agentplane.access_token import MCP_TOKEN_ENV, BearerTokenGate
from sregym.agentplane.agents.base import mcp_client
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.agentplane.server import READY_PREFIX

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "attacker", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}



def leaf(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def post(url: str, token: str | None, scheme: str = "Bearer") -> httpx.Response:
    headers = {**HEADERS, **({"Authorization": f"{scheme} {token}"} if token is not None else {})}
    return httpx.post(url, json=INITIALIZE, headers=headers, timeout=10)


def test_a_plane_answers_its_own_token_only(agent_kubeconfig: Path) -> None:
    async def go():
        async with AgentPlane(agent_kubeconfig, "shop", AgentBudgets()) as a, \
                AgentPlane(agent_kubeconfig, "shop", AgentBudgets()) as b:
            task = a.task(prompt="p", seed=1)
            assert task.mcp_token == a.mcp_token and a.mcp_token != b.mcp_token
            assert a.mcp_token not in task.model_dump_json() and a.mcp_token not in repr(task)
            raw = {name: await anyio.to_thread.run_sync(post, a.mcp_url, token, scheme) for name, token, scheme in (
                ("none", None, ""), ("basic", a.mcp_token, "Basic"), ("other cell", b.mcp_token, "Bearer"),
                ("prefix", a.mcp_token[:-1], "Bearer"), ("own", a.mcp_token, "Bearer"))}
            async with mcp_client(a.mcp_url, a.mcp_token) as mcp:
                version = await mcp.call_tool("kubectl", {"command": "version --client"})
            with pytest.raises(Exception) as refused:  # the official client without the token
                async with Client(a.mcp_url) as mcp:
                    await mcp.list_tools()
            with pytest.raises(Exception) as crossed:  # one cell's agent on the other's tools
                async with mcp_client(b.mcp_url, a.mcp_token) as mcp:
                    await mcp.list_tools()
            return raw, version, refused.value, crossed.value, len(a.tool_calls) + len(b.tool_calls)

    raw, version, refused, crossed, calls = anyio.run(go)
    assert {name: r.status_code for name, r in raw.items()} == {
        "none": 401, "basic": 401, "other cell": 401, "prefix": 401, "own": 200}
    assert raw["none"].headers["www-authenticate"] == "Bearer" and MCP_TOKEN_ENV in raw["none"].text
    assert not version.is_error
    assert all(isinstance(leaf(e), MCPError) for e in (refused, crossed))  # the 401s, as the SDK reports them
    assert calls == 1  # only the authorised call reached a tool


def test_the_gate_refuses_a_repeated_or_short_token() -> None:
    gate = BearerTokenGate(app=None, token="t" * 32)
    assert gate.allows({"headers": [(b"authorization", b"Bearer " + b"t" * 32)]})
    assert not gate.allows({"headers": [(b"authorization", b"Bearer " + b"t" * 32)] * 2})
    assert not gate.allows({"headers": [(b"authorization", b"bearer " + b"t" * 32)]})
    with pytest.raises(ValueError, match="at least 16"):
        BearerTokenGate(app=None, token="short")


def test_the_server_refuses_to_serve_http_without_a_token(agent_kubeconfig: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != MCP_TOKEN_ENV}
    done = subprocess.run([sys.executable, "-m", "sregym.agentplane.server", "--kubeconfig", str(agent_kubeconfig),
                           "--namespace", "shop"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode != 0 and MCP_TOKEN_ENV in done.stderr


def test_mcp_serve_mints_a_token_and_prints_it_for_byo_agents(agent_kubeconfig: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != MCP_TOKEN_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "sregym", "mcp", "serve", "--agent-kubeconfig",
                             str(agent_kubeconfig), "-n", "shop"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        token = None
        while token is None:  # printed before the server starts
            line = proc.stderr.readline()
            assert line, "no token printed"
            token = (re.search(rf"{MCP_TOKEN_ENV}=(\S+)", line) or [None, None])[1]
        url = None
        deadline = time.monotonic() + 60
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith(READY_PREFIX):
                url = line[len(READY_PREFIX):].strip()
        assert url, "the server did not start"
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode()
        statuses = [post(url, t).status_code for t in (None, "x" * 43, token)]
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    assert statuses == [401, 401, 200]
    assert token not in cmdline  # never on the command line (ps shows it)
