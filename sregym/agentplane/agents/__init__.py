"""Built-in agents (noop, random, react, command, replay); each module registers itself in ``AGENTS``."""

from sregym.agentplane.agents.base import AGENTS, Agent, AgentResult, AgentTask, agent, connect, mcp_client, submit

__all__ = ["AGENTS", "Agent", "AgentResult", "AgentTask", "agent", "connect", "mcp_client", "submit"]
