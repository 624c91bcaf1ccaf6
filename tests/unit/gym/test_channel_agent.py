"""The env's policy channel through the real agent plane (the MCP server process and its event
receiver), no cluster: each action is one call to the same server ``sregym run`` uses, malformed
actions come back as errors the policy reads and count as invalid, and submit_mitigation ends it.
The agent kubeconfig points at a closed port (conftest), so cluster calls fail as an unreachable
API server would."""

from __future__ import annotations

from pathlib import Path

import anyio

from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.plane import AgentPlane
from sregym.gym.channel import ChannelAgent, ToolChannel
from sregym.gym.spaces import parse_action

PROMPT = "An alert fired: the tiny service answers with the wrong greeting."


def play(kubeconfig: Path, actions: list[dict], budgets: AgentBudgets):
    async def go():
        channel = ToolChannel()
        verdicts = []

        def judge(call):
            verdicts.append(call)
            channel.verdict(invalid=call.invalid, wrong=0)

        async with AgentPlane(kubeconfig, "shop", budgets, on_tool_call=judge) as plane:
            task = plane.task(prompt=PROMPT, seed=1)
            replies, result = [], []
            async with anyio.create_task_group() as tg:
                async def agent():
                    result.append(await plane.run_agent(ChannelAgent(channel), task))

                tg.start_soon(agent)
                await channel.opened.wait()
                for action in actions:
                    replies.append(await channel.exchange(parse_action(action)))
            await anyio.sleep(0.2)
            return channel, replies, result[0], plane.trajectory(result[0]), verdicts

    return anyio.run(go)


def test_actions_run_through_the_sealed_server_and_malformed_ones_are_invalid(agent_kubeconfig: Path) -> None:
    actions = [
        {"tool": "kubectl", "arguments": '{"command": ["version", "--client"]}'},
        {"tool": "kubectl", "arguments": '{"command": ["get", "pods"'},  # not JSON: answered by the env side
        {"tool": "ssh_into_node", "arguments": '{"host": "node-1"}'},  # no such tool: the server says so
        {"tool": "kubectl", "arguments": '{"commandz": "get pods"}'},  # does not match the schema
        {"tool": "submit_diagnosis", "arguments": '{"text": "the greeting setting drifted"}'},
        {"tool": "submit_mitigation", "arguments": ""},
    ]
    channel, replies, result, traj, verdicts = play(agent_kubeconfig, actions, AgentBudgets(steps=10, seconds=120))
    assert PROMPT == channel.prompt and {"kubectl", "submit_diagnosis", "submit_mitigation"} <= set(channel.tools)
    assert "command" in channel.tools["kubectl"]["properties"]
    version, not_json, unknown, bad_schema, diagnosis, mitigation = replies
    assert not version.error and "Client Version" in version.text and version.invalid == 0
    assert not_json.error and "not JSON" in not_json.text and not_json.invalid == 1
    assert unknown.error and "ssh_into_node" in unknown.text and unknown.invalid == 1
    assert bad_schema.error and bad_schema.invalid == 1
    assert not diagnosis.error and not diagnosis.done
    assert mitigation.done and result.stop_reason == "submitted" and traj.stop_reason == "submitted"
    # the record's trajectory counts the same invalid actions the env reported
    assert traj.invalid_actions == 3
    assert [c.tool for c in traj.tool_calls] == ["kubectl", "ssh_into_node", "kubectl", "submit_diagnosis",
                                                 "submit_mitigation"]
    assert traj.submission("diagnosis").text == "the greeting setting drifted"
    assert len(verdicts) == 5  # the conductor side heard every call the server recorded


def test_a_policy_that_reports_tokens_has_them_in_the_trajectory(agent_kubeconfig: Path) -> None:
    actions = [{"tool": "kubectl", "arguments": '{"command": "version --client"}', "tokens": 150},
               {"tool": "submit_mitigation", "arguments": "", "tokens": 20}]
    _, replies, result, traj, _ = play(agent_kubeconfig, actions, AgentBudgets(steps=5, seconds=60))
    assert replies[-1].done and traj.tokens == 170 and traj.invalid_actions == 0


def test_stopping_the_channel_ends_the_agent_without_a_submission(agent_kubeconfig: Path) -> None:
    async def go():
        channel = ToolChannel()
        async with AgentPlane(agent_kubeconfig, "shop", AgentBudgets(steps=1, seconds=60)) as plane:
            task = plane.task(prompt=PROMPT, seed=1)
            async with anyio.create_task_group() as tg:
                got = []

                async def agent():
                    got.append(await plane.run_agent(ChannelAgent(channel), task))

                tg.start_soon(agent)
                await channel.opened.wait()
                await channel.exchange(parse_action({"tool": "kubectl", "arguments": '{"command": "version --client"}'}))
                await channel.stop("budget_steps")
            assert channel.ended.is_set()
            assert await channel.exchange(parse_action({"tool": "kubectl", "arguments": ""})) is None
            return got[0], plane.trajectory(got[0])

    result, traj = anyio.run(go)
    assert result.stop_reason == "budget_steps" and traj.stop_reason == "budget_steps" and traj.submissions == []
