"""The policy's side of the sealed tool server: an agent driven one action at a time.

``ChannelAgent`` is an agent like any other (``sregym.agentplane.agents``): the run gives it its task,
and it talks to the run's MCP tool server with the official client, so every call is metered,
recorded and refused exactly as in ``sregym run``. Instead of deciding itself, it waits for the
env's next action on a :class:`ToolChannel` and hands back the result. Both live on the env's
event loop thread; the channel holds only what the agent may see (the prompt, the tools' schemas,
the results), never the problem.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.agents.base import Agent, AgentResult, AgentTask, StopReason, connect, result_text
from sregym.core.trajectory import ModelTurn
from sregym.gym.spaces import ToolAction, refusal_text

SUBMISSIONS = ("submit_diagnosis", "submit_mitigation")


async def first_of(*waits: Callable[[], Awaitable[Any]]) -> None:
    """Run ``waits`` side by side until the first one returns; cancel the others."""
    async with anyio.create_task_group() as tg:
        async def one(wait: Callable[[], Awaitable[Any]]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(one, wait)


@dataclass(frozen=True)
class ToolReply:
    """What one action gave back. ``invalid``/``wrong``/``evidence`` are the server's and the
    conductor's verdicts on it (counts and the evidence coverage it gained, nothing more), for shaping
    and metrics."""

    text: str
    error: bool = False
    structured: Any = None
    invalid: int = 0
    wrong: int = 0
    evidence: float = 0.0
    done: bool = False  # submit_mitigation was accepted: the agent's work is over


class ToolChannel:
    """Actions in, replies out, between the env (through its portal) and the :class:`ChannelAgent`."""

    def __init__(self) -> None:
        self._actions_in, self._actions = anyio.create_memory_object_stream[ToolAction | StopReason](1)
        self._replies_in, self._replies = anyio.create_memory_object_stream[ToolReply](1)
        self.opened = anyio.Event()
        self.ended = anyio.Event()
        self.prompt = ""
        self.tools: dict[str, dict[str, Any]] = {}  # name -> input schema, as the server lists them
        self.started_at = 0.0
        self.budgets = AgentBudgets()
        self.finished = anyio.Event()  # the run is over (graded, recovered, recorded) or failed
        # verdicts on the calls the server recorded since the last reply (set by the conductor side)
        self.invalid_seen = 0
        self.wrong_seen = 0
        self.evidence_seen = 0.0

    def verdict(self, *, invalid: bool, wrong: int, evidence: float = 0.0) -> None:
        self.invalid_seen += int(invalid)
        self.wrong_seen += wrong
        self.evidence_seen += evidence

    async def exchange(self, action: ToolAction) -> ToolReply | None:
        """Send one action and wait for its reply; None when the agent's time is over first."""
        if self.ended.is_set():
            return None
        await self._actions_in.send(action)
        got: list[ToolReply] = []

        async def reply() -> None:
            got.append(await self._replies.receive())

        await first_of(reply, self.ended.wait)
        if not got:
            try:
                got.append(self._replies.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                return None
        return got[0]

    async def stop(self, reason: StopReason) -> None:
        """Tell the agent it is done without submitting (a step or token budget the env counts)."""
        if not self.ended.is_set():
            await self._actions_in.send(reason)


class ChannelAgent(Agent):
    """Plays the env's actions through the run's tool server; see the module docstring."""

    name = "gym"
    summary = "the Gymnasium env's policy, one action per step"
    kind = "external"
    prompt_names_server = False  # the env is the policy's tool channel; the prompt stays seed-stable

    def __init__(self, channel: ToolChannel) -> None:
        self.channel = channel

    async def run(self, task: AgentTask) -> AgentResult:
        channel, turns = self.channel, []
        try:
            async with connect(task) as client:
                listed = (await client.list_tools()).tools
                channel.tools = {t.name: dict(t.input_schema or {}) for t in listed}
                channel.prompt, channel.started_at, channel.budgets = task.prompt, task.started_at, task.budgets
                channel.opened.set()
                async for action in channel._actions:
                    if isinstance(action, str):
                        return AgentResult(model_turns=turns, stop_reason=action)
                    reply = await self._play(client, task, action, turns)
                    await channel._replies_in.send(reply)
                    if reply.done:
                        return AgentResult(model_turns=turns, stop_reason="submitted")
        finally:
            channel.ended.set()
        return AgentResult(model_turns=turns, stop_reason="gave_up")

    async def _play(self, client: Any, task: AgentTask, action: ToolAction, turns: list[ModelTurn]) -> ToolReply:
        channel = self.channel
        if action.tokens:  # the policy's model turn, as an LLM agent records it
            turns.append(ModelTurn(t=task.elapsed(), completion_tokens=action.tokens, tool_calls=1,
                                   malformed=action.error is not None))
        if action.error is not None:
            if not action.tokens:
                turns.append(ModelTurn(t=task.elapsed(), tool_calls=1, malformed=True))
            return ToolReply(text=refusal_text(action), error=True, invalid=1)
        channel.invalid_seen, channel.wrong_seen, channel.evidence_seen = 0, 0, 0.0
        try:
            result = await client.call_tool(action.tool, action.arguments)
        except Exception as e:  # noqa: BLE001 - the policy reads the error; the episode goes on
            return ToolReply(text=f"error: {type(e).__name__}: {e}", error=True, invalid=channel.invalid_seen or 1)
        await anyio.sleep(0)  # the server reports before it answers; let the report land
        done = action.tool == "submit_mitigation" and not result.is_error
        return ToolReply(text=("error: " if result.is_error else "") + result_text(result), error=bool(result.is_error),
                         structured=result.structured_content, invalid=channel.invalid_seen, wrong=channel.wrong_seen,
                         evidence=channel.evidence_seen, done=done)
