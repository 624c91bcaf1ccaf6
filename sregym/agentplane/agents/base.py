"""The agent contract: an agent gets an :class:`AgentTask` and returns an :class:`AgentResult`.

Any architecture can take part; the only thing required is that it submits through the MCP
server (whose URL is in the task). Agents register under a name in :data:`AGENTS` and are
built from CLI strings: ``AGENTS.get("react")(model=..., base_url=...)``.
"""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from collections.abc import Callable
from typing import Any, AsyncIterator, ClassVar, Literal, TypeVar

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from sregym.agentplane.access_token import auth_headers
from sregym.agentplane.budgets import AgentBudgets
from sregym.core.registry import Registry
from sregym.core.trajectory import ModelTurn

StopReason = Literal["submitted", "budget_steps", "budget_seconds", "budget_tokens", "gave_up", "error"]


class AgentTask(BaseModel):
    """Everything an agent is given. Nothing here names the fault or the problem."""

    mcp_url: str = Field(..., description="Streamable HTTP endpoint of the tool server")
    mcp_token: str | None = Field(None, repr=False, exclude=True,
                                  description="the run's bearer token for mcp_url (kept out of dumps and records)")
    kubeconfig: Path = Field(..., description="the agent's own kubeconfig (RBAC-limited)")
    namespace: str
    prompt: str
    budgets: AgentBudgets = Field(default_factory=AgentBudgets)
    seed: int = 0
    prometheus_url: str | None = None
    traces_url: str | None = None
    logs_url: str | None = None
    started_at: float = Field(default_factory=time.time, description="unix time the agent phase started")
    # the run's sandbox namespace (sregym.agentplane.sandbox.Sandbox), where external agents run;
    # the conductor's handle, never serialised or handed to the agent's own process
    sandbox: Any = Field(None, exclude=True, repr=False)

    def elapsed(self) -> float:
        return time.time() - self.started_at


class AgentResult(BaseModel):
    """What an agent reports back; the tool calls themselves are recorded by the server."""

    model_turns: list[ModelTurn] = Field(default_factory=list)
    stop_reason: StopReason = "submitted"
    error: str | None = None
    model: str | None = None


class Agent:
    """Base of built-in agents. ``kind`` goes into the run record (baseline, llm, external)."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    kind: ClassVar[str] = "baseline"

    async def run(self, task: AgentTask) -> AgentResult:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def model(self) -> str | None:
        return None


AGENTS: Registry[type[Agent]] = Registry("agent", builtin_package="sregym.agentplane.agents")
A = TypeVar("A", bound=type)


def agent(name: str) -> Callable[[A], A]:
    """Class decorator registering an agent under ``name`` (``@agent("react")``), built from the
    CLI's ``--agent NAME``."""
    return AGENTS.plugin(name)


@asynccontextmanager
async def mcp_client(url: str, token: str | None, read_timeout: float = 300) -> AsyncIterator[Client]:
    """An official MCP client session over Streamable HTTP that sends the run's bearer token."""
    async with httpx2.AsyncClient(headers=auth_headers(token), timeout=httpx2.Timeout(30, read=read_timeout)) as http:
        async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=read_timeout) as client:
            yield client


@asynccontextmanager
async def connect(task: AgentTask) -> AsyncIterator[Client]:
    """An official MCP client session to the task's server, with the task's token."""
    async with mcp_client(task.mcp_url, task.mcp_token) as client:
        yield client


def result_text(result: CallToolResult) -> str:
    """The text content of a tool result (what a model reads)."""
    return "\n".join(getattr(c, "text", "") for c in result.content if getattr(c, "text", None) is not None)


async def submit(client: Client, diagnosis: str, **fields: Any) -> None:
    """Submit a diagnosis, then that mitigation is done."""
    await client.call_tool("submit_diagnosis", {"text": diagnosis, **{k: v for k, v in fields.items() if v}})
    await client.call_tool("submit_mitigation", {})
