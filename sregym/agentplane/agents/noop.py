"""``noop``: submits at once. The floor every other agent must beat."""

from __future__ import annotations

from sregym.agentplane.agents.base import Agent, AgentResult, AgentTask, agent, connect, submit


@agent("noop")
class NoopAgent(Agent):
    """Submits "no diagnosis" and declares mitigation done without looking at anything."""

    async def run(self, task: AgentTask) -> AgentResult:
        async with connect(task) as client:
            await submit(client, "no diagnosis")
        return AgentResult(stop_reason="submitted")
