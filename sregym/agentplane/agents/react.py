"""``react``: an LLM agent with tool calling over any OpenAI-compatible chat-completions endpoint.

A ReAct loop: the model reads the task, calls tools (the MCP server's, described to it in the
chat-completions ``tools`` format), reads the results, and repeats until it calls
``submit_mitigation`` or a budget (steps, wall time, tokens) runs out. A malformed tool call (arguments
that are not a JSON object, or a tool that does not exist) is answered with an error message so
the model can retry, and the turn is recorded as malformed (an invalid action).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp.types import Tool

from sregym.agentplane.agents.base import Agent, AgentResult, AgentTask, StopReason, agent, connect, result_text
from sregym.models import DEFAULT_API_KEY_ENV, ChatClient, ToolCallRequest, function_tool
from sregym.core.trajectory import ModelTurn

MODEL_ENV, BASE_URL_ENV = "SREGYM_MODEL", "SREGYM_BASE_URL"
DEFAULT_MODEL, DEFAULT_BASE_URL = "gpt-4o-mini", "https://api.openai.com/v1"
SYSTEM_PROMPT = (
    "You are the on-call site reliability engineer. Work only through the tools. Investigate before you "
    "change anything, change only what is needed, then call submit_diagnosis with what is wrong and why, "
    "and finally submit_mitigation once the service is healthy again. Call one tool at a time when you can.")
NUDGE = ("Continue with a tool call. When you know the cause and have fixed it, call submit_diagnosis and then "
         "submit_mitigation.")
MAX_TEXT_ONLY_TURNS = 3


def first_leaf(e: BaseException) -> BaseException:
    """The first real exception inside (possibly nested) task-group exception groups."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def openai_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """MCP tool listings in the chat-completions ``tools`` format."""
    return [function_tool(t.name, t.description or t.name, t.input_schema or {"type": "object", "properties": {}})
            for t in tools]


def invalid_call_message(call: ToolCallRequest, known: set[str]) -> str | None:
    """Why a requested call cannot be executed, or None when it can."""
    if call.parse_error:
        return f"error: your call to {call.name or '(no name)'} was not executed: {call.parse_error}. Call it again with a JSON object."
    if call.name not in known:
        return f"error: there is no tool named {call.name!r}; the tools are: {', '.join(sorted(known))}"
    return None


@agent("react")
class ReactAgent(Agent):
    """An LLM agent (a ReAct loop with tool calling) over any OpenAI-compatible chat-completions endpoint.

    ``ReactAgent(model=..., base_url=..., api_key_env=...)``; unset model and base URL come from
    $SREGYM_MODEL and $SREGYM_BASE_URL, the key from $SREGYM_API_KEY (or the variable ``api_key_env`` names)."""

    kind = "llm"

    def __init__(self, model: str | None = None, base_url: str | None = None,
                 api_key_env: str = DEFAULT_API_KEY_ENV, temperature: float | None = 0.0,
                 client: ChatClient | None = None) -> None:
        # Defaults from the environment so the conductor can build it by name alone.
        self.client = client or ChatClient(base_url or os.environ.get(BASE_URL_ENV, DEFAULT_BASE_URL),
                                           model or os.environ.get(MODEL_ENV, DEFAULT_MODEL), api_key_env=api_key_env)
        self.temperature = temperature

    @property
    def model(self) -> str | None:
        return self.client.model

    async def run(self, task: AgentTask) -> AgentResult:
        turns: list[ModelTurn] = []
        try:
            with anyio.move_on_after(max(0.0, task.budgets.seconds - task.elapsed())) as scope:
                reason = await self._loop(task, turns)
            if scope.cancelled_caught:
                reason = "budget_seconds"
        except Exception as e:  # noqa: BLE001 - the run record must say why the agent stopped
            cause = first_leaf(e)
            return AgentResult(model_turns=turns, stop_reason="error", error=f"{type(cause).__name__}: {cause}",
                               model=self.model)
        return AgentResult(model_turns=turns, stop_reason=reason, model=self.model)

    async def _loop(self, task: AgentTask, turns: list[ModelTurn]) -> StopReason:
        async with connect(task) as mcp:
            listed = (await mcp.list_tools()).tools
            tools, known = openai_tools(listed), {t.name for t in listed}
            messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                              {"role": "user", "content": task.prompt}]
            steps = tokens = text_only = 0
            while True:
                if task.budgets.tokens is not None and tokens >= task.budgets.tokens:
                    return "budget_tokens"
                if steps >= task.budgets.steps:
                    return "budget_steps"
                reply = await self.client.achat(messages, tools=tools, tool_choice="auto",
                                                temperature=self.temperature, seed=task.seed)
                tokens += reply.total_tokens
                reply_t = task.elapsed()
                messages.append({"role": "assistant", "content": reply.content, **(
                    {"tool_calls": reply.message["tool_calls"]} if reply.tool_calls else {})})
                malformed = False
                if not reply.tool_calls:
                    turns.append(ModelTurn(t=task.elapsed(), reply_t=reply_t, prompt_tokens=reply.prompt_tokens,
                                           completion_tokens=reply.completion_tokens))
                    text_only += 1
                    if text_only >= MAX_TEXT_ONLY_TURNS:
                        return "gave_up"
                    messages.append({"role": "user", "content": NUDGE})
                    continue
                text_only = 0
                done = False
                for call in reply.tool_calls:
                    problem = invalid_call_message(call, known)
                    if problem is not None:
                        malformed = True
                        content = problem
                    elif steps >= task.budgets.steps and call.name not in ("submit_diagnosis", "submit_mitigation"):
                        content = "error: the step budget is spent; only submit_diagnosis and submit_mitigation remain"
                    else:
                        if call.name not in ("submit_diagnosis", "submit_mitigation"):
                            steps += 1
                        result = await mcp.call_tool(call.name, call.arguments or {})
                        content = ("error: " if result.is_error else "") + result_text(result)
                        done = done or (call.name == "submit_mitigation" and not result.is_error)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
                turns.append(ModelTurn(t=task.elapsed(), reply_t=reply_t, prompt_tokens=reply.prompt_tokens,
                                       completion_tokens=reply.completion_tokens, tool_calls=len(reply.tool_calls),
                                       malformed=malformed))
                if done:
                    return "submitted"

