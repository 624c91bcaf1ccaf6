"""Agents end to end through the real agent plane (MCP server process + event receiver), no cluster.

The agent kubeconfig points at a closed port, so cluster calls fail like an unreachable API server
would; `kubectl version --client` succeeds without a cluster. The react agent talks to the real
local playback server (an OpenAI-compatible HTTP server) that plays scripted replies.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import anyio
import pytest

from sregym.agentplane.agents import AGENTS
from sregym.agentplane.agents.command import CommandAgent
from sregym.agentplane.agents.react import ReactAgent
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.core.errors import PrerequisiteError, UserInputError
from sregym.models import ChatClient
from sregym.testing.llm_playback import PlaybackServer, Reply, ScriptedToolCall, raw_tool_call, text, tool_call
from procfs import ended

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


def test_the_trajectory_keeps_the_prompt_the_agent_was_given(agent_kubeconfig: Path) -> None:
    with PlaybackServer([tool_call("submit_mitigation", {})]) as llm:
        agent = ReactAgent(client=ChatClient(llm.base_url, "scripted-model"))
        _, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=3, seconds=60))
    assert traj.prompt == PROMPT


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
    # the record keeps what the tool answered (training data needs it), the very text the model was sent
    answered = [m["content"] for r in requests for m in r["messages"] if m.get("role") == "tool"]
    assert version.result_text and len(version.result_text) == version.result_bytes
    assert any(version.result_text in str(a) for a in answered), answered
    assert get_pods.result_text == get_pods.error or get_pods.error in get_pods.result_text
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


def test_react_agent_records_when_each_reply_came_so_calls_made_together_stay_together(
        agent_kubeconfig: Path) -> None:
    script = [
        Reply(tool_calls=[ScriptedToolCall(name="kubectl", arguments={"command": ["version", "--client"]}),
                          ScriptedToolCall(name="kubectl", arguments={"command": ["config", "view"]})]),
        tool_call("submit_diagnosis", {"text": "nothing is wrong"}),
        tool_call("submit_mitigation", {}),
    ]
    with PlaybackServer(script) as llm:
        agent = ReactAgent(client=ChatClient(llm.base_url, "scripted-model"))
        result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets(steps=10, seconds=120))
    first, *_ = result.model_turns
    assert first.tool_calls == 2 and first.reply_t is not None
    together = [c for c in traj.tool_calls if first.reply_t <= c.t <= first.t]
    assert [c.arguments["command"][0] for c in together] == ["version", "config"]
    assert all(t.reply_t is not None and t.reply_t <= t.t for t in result.model_turns)


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


@pytest.fixture()
def shared_dir():
    """A folder the unprivileged agent user can write (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="sre-agent-test-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def unprivileged() -> str | None:
    """The user a host agent runs as in these tests: nobody when we are root, else ourselves."""
    return "nobody" if os.geteuid() == 0 else None


def test_command_agent_on_the_host_runs_unprivileged_with_a_scrubbed_environment_and_the_prompt(
        agent_kubeconfig: Path, shared_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("SREGYM_PROBLEM", "hotel_geo_wrong_port")
    monkeypatch.setenv("MY_AGENT_KEY", "k")
    script = ('id -u > "$1/uid"; env > "$1/env"; cat > "$1/stdin"; cat "$SREGYM_PROMPT_FILE" > "$1/prompt"; '
              'cat "$KUBECONFIG" > "$1/kubeconfig"; cat /var/lib/sregym/journal/* > "$1/journal" 2>&1 || true')
    agent = CommandAgent(["/bin/sh", "-c", script, "agent", str(shared_dir)], timeout=60, pass_env=["MY_AGENT_KEY"],
                         run_as=unprivileged(), host=True)
    result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets())
    assert result.stop_reason == "submitted", result.error
    assert (shared_dir / "uid").read_text().strip() != "0"
    assert (shared_dir / "stdin").read_text() == PROMPT and (shared_dir / "prompt").read_text() == PROMPT
    assert (shared_dir / "kubeconfig").read_text() == agent_kubeconfig.read_text()
    env = dict(line.split("=", 1) for line in (shared_dir / "env").read_text().splitlines() if "=" in line)
    assert env["SREGYM_MCP_TOKEN"]  # the tool server's bearer token (the plane's own)
    allowed = {"PATH", "LANG", "HOME", "SREGYM_MCP_URL", "SREGYM_MCP_TOKEN", "KUBECONFIG", "SREGYM_PROMPT_FILE", "SREGYM_NAMESPACE",
               "MY_AGENT_KEY"}
    assert set(env) - {"PWD", "SHLVL", "_", "LC_CTYPE"} <= allowed
    assert env["HOME"] != os.environ.get("HOME") and "SREGYM_PROBLEM" not in env


def test_command_agent_on_the_host_is_killed_at_its_time_limit(agent_kubeconfig: Path, shared_dir: Path) -> None:
    agent = CommandAgent(["/bin/sh", "-c", 'echo $$ > "$1/pid"; exec sleep 120', "agent", str(shared_dir)],
                         timeout=2, run_as=unprivileged(), host=True)
    result, traj, _ = run_in_plane(agent_kubeconfig, agent, AgentBudgets())
    assert result.stop_reason == "budget_seconds"
    pid = int((shared_dir / "pid").read_text())
    assert ended(pid)
    assert traj.submission("mitigation") is None


def test_command_agent_never_runs_as_root_on_the_host(monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(UserInputError, match="--run-as"):
        CommandAgent(["true"], host=True)
    with pytest.raises(UserInputError, match="root"):
        CommandAgent(["true"], host=True, run_as="root")
    with pytest.raises(UserInputError, match="--agent-host"):
        CommandAgent(["true"], run_as="nobody")


def test_command_agent_runs_in_the_sandbox_by_default(agent_kubeconfig: Path) -> None:
    """Without a sandbox (no cluster here) the default placement refuses rather than fall back to the host."""
    with pytest.raises(BaseExceptionGroup) as raised:
        run_in_plane(agent_kubeconfig, CommandAgent(["true"]), AgentBudgets())
    assert raised.group_contains(PrerequisiteError, match="sandbox")


def test_replay_agent_makes_the_recorded_calls_again_in_order(agent_kubeconfig: Path, tmp_path: Path) -> None:
    # a run's calls (a run record's trajectory, or a plain list) played again through the real server:
    # what the gym's policy did can be re-run as `sregym run --agent replay` with the same seed
    from sregym.agentplane.agents.replay import ReplayAgent
    from sregym.core.trajectory import ToolCall, Trajectory

    calls = [ToolCall(t=0.5, tool="kubectl", arguments={"command": ["version", "--client"]}),
             ToolCall(t=1.0, tool="ssh_into_node", arguments={"host": "node-1"}, invalid=True),
             ToolCall(t=2.0, tool="submit_diagnosis", arguments={"text": "checkout's database is down"}),
             ToolCall(t=3.0, tool="submit_mitigation", arguments={})]
    saved = tmp_path / "trajectory.json"
    saved.write_text(Trajectory(tool_calls=calls).model_dump_json())
    result, traj, _ = run_in_plane(agent_kubeconfig, ReplayAgent(actions=str(saved)), AgentBudgets(steps=10, seconds=60))
    assert result.stop_reason == "submitted" and traj.stop_reason == "submitted"
    # every call goes to the server as recorded, the unknown tool too (the server counts it invalid again)
    assert [(c.tool, c.arguments, c.invalid) for c in traj.tool_calls] == [(c.tool, c.arguments, c.invalid) for c in calls]
    assert traj.submission("diagnosis").text == "checkout's database is down"

    plain = tmp_path / "calls.json"
    plain.write_text(json.dumps([{"tool": "kubectl", "arguments": {"command": ["version", "--client"]}}]))
    result, traj, _ = run_in_plane(agent_kubeconfig, ReplayAgent(actions=str(plain)), AgentBudgets(steps=10, seconds=60))
    assert [c.tool for c in traj.tool_calls] == ["kubectl"] and result.stop_reason == "gave_up"


@pytest.mark.parametrize("content, says", [(None, "no such file"), ("{not json", "not JSON"),
                                           ('{"tool_calls": [{"arguments": {}}]}', "tool")])
def test_replay_agent_refuses_a_bad_actions_file_before_the_run(tmp_path: Path, content, says) -> None:
    from sregym.agentplane.agents.replay import ReplayAgent

    path = tmp_path / "actions.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UserInputError) as e:
        ReplayAgent(actions=str(path))
    assert str(path) in str(e.value) and says in str(e.value)
