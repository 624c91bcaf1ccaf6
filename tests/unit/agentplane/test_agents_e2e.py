"""Agents end to end through the real agent plane (MCP server process + event receiver), no cluster.

The agent kubeconfig points at a closed port, so cluster calls fail like an unreachable API server
would; `kubectl version --client` succeeds without a cluster. The react agent talks to the real
local playback server (an OpenAI-compatible HTTP server) that plays scripted replies.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from sregym.agentplane.agents import AGENTS
from sregym.agentplane.agents.command import CommandAgent
from sregym.agentplane.agents.react import ReactAgent
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.core.llm import ChatClient
from sregym.core.llm_playback import PlaybackServer, Reply, raw_tool_call, text, tool_call

PROMPT = "An alert fired: checkout p99 latency above 2s in namespace shop."



def run_in_plane(kubeconfig: Path, agent, budgets: AgentBudgets, inspect=None):
    """Open a plane, run ``agent``, return (result, trajectory, whatever ``inspect(plane)`` returns)."""

    async def go():
        async with AgentPlane(kubeconfig, "shop", budgets) as plane:
            task = plane.task(prompt=PROMPT, seed=7)
            extra = inspect(plane) if inspect else None
            result = await plane.run_agent(agent, task)
            await anyio.sleep(0.2)  # the last event is posted before the tool returns; let the receiver settle
            return result, plane.trajectory(result), extra

    return anyio.run(go)


def test_react_agent_investigates_counts_malformed_calls_and_submits(agent_kubeconfig: Path) -> None:
    script = [
        tool_call("kubectl", {"command": ["version", "--client"]}, prompt_tokens=100, completion_tokens=20),
        raw_tool_call("kubectl", '{"command": ["get", "pods"', prompt_tokens=130, completion_tokens=15),
        tool_call("ssh_into_node", {"host": "node-1"}),
        tool_call("kubectl", {"command": "get pods -n shop"}),
        tool_call("submit_diagnosis", {"text": "checkout cannot reach its database", "component": "checkout"}),
        tool_call("submit_mitigation", {}),
    ]
    with PlaybackServer(script) as llm:
        agent = ReactAgent(client=ChatClient(llm.base_url, "scripted-model"))
        result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=10, seconds=120))
        requests = [r.json for r in llm.chat_requests]

    assert result.stop_reason == "submitted" and result.error is None
    assert traj.stop_reason == "submitted"
    # the server saw only the executable calls; the malformed and unknown ones were answered by the agent
    assert [c.tool for c in traj.tool_calls] == ["kubectl", "kubectl", "submit_diagnosis", "submit_mitigation"]
    version, get_pods = traj.tool_calls[0], traj.tool_calls[1]
    assert version.verb == "version" and version.error is None and version.result_bytes > 0
    assert get_pods.verb == "get" and get_pods.error and not get_pods.invalid  # the API is down: an error, not invalid
    assert [t.malformed for t in result.model_turns] == [False, True, True, False, False, False]
    assert traj.invalid_actions == 2
    assert result.model_turns[0].prompt_tokens == 100 and result.model_turns[1].completion_tokens == 15
    assert traj.submission("diagnosis").text == "checkout cannot reach its database"
    assert traj.submission("diagnosis").fields == {"component": "checkout"}
    # what the model was sent: the task, the MCP tools, and error messages it can act on
    assert requests[0]["messages"][1]["content"] == PROMPT
    offered = {t["function"]["name"] for t in requests[0]["tools"]}
    assert {"kubectl", "query_logs", "submit_diagnosis", "submit_mitigation"} <= offered
    after_malformed = requests[2]["messages"][-1]
    assert after_malformed["role"] == "tool" and "not valid JSON" in after_malformed["content"]
    after_unknown = requests[3]["messages"][-1]
    assert "no tool named 'ssh_into_node'" in after_unknown["content"] and "kubectl" in after_unknown["content"]
    assert "Client Version" in requests[1]["messages"][-1]["content"]


def test_react_agent_stops_at_the_step_budget(agent_kubeconfig: Path) -> None:
    with PlaybackServer([tool_call("kubectl", {"command": ["version", "--client"]})], on_exhausted="repeat_last") as llm:
        agent = ReactAgent(client=ChatClient(llm.base_url, "m"))
        result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=3, seconds=120))
    assert result.stop_reason == "budget_steps"
    assert traj.steps == 3 and traj.stop_reason == "budget_steps"
    assert traj.submission("mitigation") is None


def test_react_agent_stops_at_the_token_budget(agent_kubeconfig: Path) -> None:
    reply = tool_call("kubectl", {"command": ["version", "--client"]}, prompt_tokens=50, completion_tokens=10)
    with PlaybackServer([reply], on_exhausted="repeat_last") as llm:
        agent = ReactAgent(client=ChatClient(llm.base_url, "m"))
        result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=50, seconds=120, tokens=150))
        asked = len(llm.chat_requests)
    assert result.stop_reason == "budget_tokens"
    assert asked == 3 and traj.tokens == 180


def test_react_agent_stops_at_the_time_budget(agent_kubeconfig: Path) -> None:
    slow = Reply(content="thinking", prompt_tokens=1, completion_tokens=1, delay_s=1.5)
    with PlaybackServer([slow], on_exhausted="repeat_last") as llm:
        agent = ReactAgent(client=ChatClient(llm.base_url, "m"))
        result, _, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=50, seconds=2))
    assert result.stop_reason == "budget_seconds"


def test_react_agent_gives_up_after_text_only_turns(agent_kubeconfig: Path) -> None:
    with PlaybackServer([text("I think it is DNS.")], on_exhausted="repeat_last") as llm:
        agent = ReactAgent(client=ChatClient(llm.base_url, "m"))
        result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=5, seconds=60))
        nudges = [r.json["messages"][-1]["content"] for r in llm.chat_requests[1:]]
    assert result.stop_reason == "gave_up" and len(result.model_turns) == 3
    assert traj.submission("diagnosis") is None and all("submit_diagnosis" in n for n in nudges)


def test_react_agent_reports_an_unreachable_model_as_an_error(agent_kubeconfig: Path) -> None:
    with PlaybackServer([]) as llm:
        url = llm.base_url
    agent = ReactAgent(client=ChatClient(url, "m", max_attempts=1))
    result, _, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=5, seconds=60))
    assert result.stop_reason == "error" and "cannot reach" in result.error


def test_noop_agent_submits_at_once(agent_kubeconfig: Path) -> None:
    result, traj, _ = run_in_plane(agent_kubeconfig, AGENTS.get("noop")(), AgentBudgets())
    assert [s.kind for s in traj.submissions] == ["diagnosis", "mitigation"]
    assert traj.steps == 2 and traj.stop_reason == "submitted" and result.stop_reason == "submitted"


def test_random_agent_is_seeded_and_stays_within_the_budget(agent_kubeconfig: Path) -> None:
    runs = [run_in_plane(agent_kubeconfig, AGENTS.get("random")(), AgentBudgets(steps=4, seconds=120))[1]
            for _ in range(2)]
    calls = [[(c.tool, c.arguments) for c in t.tool_calls if not c.tool.startswith("submit")] for t in runs]
    assert len(calls[0]) == 4 and calls[0] == calls[1]
    assert all(not c.invalid and c.read_only for c in runs[0].tool_calls if not c.tool.startswith("submit"))
    assert runs[0].submission("mitigation") is not None


def test_tool_server_environment_holds_nothing_but_its_own(agent_kubeconfig: Path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/var/lib/sregym/clusters/default/admin.kubeconfig")
    monkeypatch.setenv("SREGYM_PROBLEM", "hotel_geo_wrong_port")

    def environ(plane: AgentPlane) -> dict[str, str]:
        raw = Path(f"/proc/{plane.server_pid}/environ").read_bytes()
        return dict(item.split("=", 1) for item in raw.decode().split("\0") if item)

    _, _, env = run_in_plane(agent_kubeconfig, AGENTS.get("noop")(), AgentBudgets(), inspect=environ)
    assert set(env) <= {"PATH", "LANG", "HOME", "PYTHONPATH", "SREGYM_CALLBACK_TOKEN", "SREGYM_MCP_TOKEN"}
    assert "admin" not in json.dumps(env) and "hotel_geo" not in json.dumps(env)


def test_command_agent_gets_a_scrubbed_environment_and_the_prompt(agent_kubeconfig: Path, tmp_path: Path,
                                                                  monkeypatch) -> None:
    monkeypatch.setenv("SREGYM_PROBLEM", "hotel_geo_wrong_port")
    monkeypatch.setenv("MY_AGENT_KEY", "k")
    report = tmp_path / "seen.json"
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(f"""\
        import json, os, sys, anyio, httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        seen = {{"env": dict(os.environ), "stdin": sys.stdin.read(),
                 "prompt_file": open(os.environ["SREGYM_PROMPT_FILE"]).read(),
                 "kubeconfig": open(os.environ["KUBECONFIG"]).read()}}
        json.dump(seen, open({str(report)!r}, "w"))
        async def main():
            headers = {{"Authorization": "Bearer " + os.environ["SREGYM_MCP_TOKEN"]}}
            async with httpx2.AsyncClient(headers=headers) as http, \\
                    Client(streamable_http_client(os.environ["SREGYM_MCP_URL"], http_client=http)) as c:
                await c.call_tool("submit_diagnosis", {{"text": "from the external agent"}})
                await c.call_tool("submit_mitigation", {{}})
        anyio.run(main)
        """))
    agent = CommandAgent([sys.executable, str(script)], timeout=60, pass_env=["MY_AGENT_KEY"])
    result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets())
    seen = json.loads(report.read_text())
    assert result.stop_reason == "submitted", result.error
    assert traj.submission("diagnosis").text == "from the external agent"
    assert seen["stdin"] == PROMPT and seen["prompt_file"] == PROMPT
    assert seen["kubeconfig"] == agent_kubeconfig.read_text()
    allowed = {"PATH", "LANG", "HOME", "SREGYM_MCP_URL", "SREGYM_MCP_TOKEN", "KUBECONFIG", "SREGYM_PROMPT_FILE",
               "SREGYM_NAMESPACE", "MY_AGENT_KEY"}
    assert set(seen["env"]) - {"PWD", "SHLVL", "_", "LC_CTYPE"} <= allowed
    assert seen["env"]["HOME"] != os.environ.get("HOME") and "SREGYM_PROBLEM" not in seen["env"]


def test_command_agent_is_killed_at_its_time_limit(agent_kubeconfig: Path, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = tmp_path / "sleepy.py"
    script.write_text(f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n")
    agent = CommandAgent([sys.executable, str(script)], timeout=2)
    result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets())
    assert result.stop_reason == "budget_seconds"
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert traj.submission("mitigation") is None
