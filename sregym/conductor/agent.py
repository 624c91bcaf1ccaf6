"""The agent phase: open the agent plane, hand the agent its task, enforce the wall-time budget,
and collect the trajectory. The prompt states the task as an on-call SRE gets it: the alert and
the namespace, never the fault."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from sregym.cluster.handle import ClusterHandle
from sregym.conductor.appdriver import DeployedApp
from sregym.core.problem import Budgets
from sregym.core.errors import PrerequisiteError
from sregym.core.record import AgentInfo
from sregym.core.trajectory import Trajectory

# Seconds an agent may overrun its wall budget (to submit) before the conductor stops it.
GRACE_S = 30.0


def task_prompt(alert: str, namespace: str) -> str:
    return (
        f"You are the on-call SRE. This alert fired:\n\n  {alert}\n\n"
        f"The application runs in the Kubernetes namespace `{namespace}`. Investigate with the tools you have "
        "(kubectl, metrics, logs, traces), find the root cause, and fix it. When you know the root cause, "
        "submit a diagnosis with submit_diagnosis; when the service is healthy again, call submit_mitigation."
    )


def agent_info(name: str) -> AgentInfo:
    if name == "oracle":
        return AgentInfo(name="oracle", kind="oracle", leaderboard=False)
    model = None
    try:
        from sregym.agentplane.agents import AGENTS

        cls = AGENTS.get(name)
        kind = getattr(cls, "kind", "baseline")
        model = getattr(cls, "model", None)
    except ImportError:
        kind = "baseline"
    return AgentInfo(name=name, kind=kind if kind in ("baseline", "llm", "external") else "baseline",
                     model=model if isinstance(model, str) else None)


def _plane_modules() -> tuple[Any, Any, Any, Any]:
    try:
        from sregym.agentplane.agents import AGENTS, AgentResult
        from sregym.agentplane.budgets import AgentBudgets
        from sregym.agentplane.plane import AgentPlane
    except ImportError as e:
        raise PrerequisiteError(f"the agent plane is not available ({e})",
                                hint="sregym.agentplane must provide plane.AgentPlane and agents.AGENTS") from None
    return AgentPlane, AGENTS, AgentResult, AgentBudgets


def agent_access(cluster: ClusterHandle, namespace: str) -> Path:
    """A kubeconfig for the agent: a ServiceAccount limited by RBAC to the app's namespace."""
    try:
        from sregym.cluster.agent_access import create_agent_access
    except ImportError as e:
        raise PrerequisiteError(f"agent access is not available ({e})",
                                hint="sregym.cluster.agent_access.create_agent_access is needed") from None
    return create_agent_access(cluster.kube, namespace)


async def run_agent(*, agent: str, cluster: ClusterHandle, app: DeployedApp, alert: str, budgets: Budgets,
                    seed: int, oracle_factory: Callable[[], Any] | None = None,
                    note: Callable[[str], None] = lambda m: None) -> Trajectory:
    """Run one agent against the live incident and return what it did."""
    AgentPlane, AGENTS, AgentResult, AgentBudgets = _plane_modules()
    kubeconfig = await anyio.to_thread.run_sync(agent_access, cluster, app.namespace)
    async with AgentPlane(agent_kubeconfig=kubeconfig, prometheus_url=app.prometheus_url,
                          traces_url=app.traces_url, logs_url=app.logs_url, namespace=app.namespace,
                          budgets=AgentBudgets(**budgets.model_dump())) as plane:
        task = plane.task(prompt=task_prompt(alert, app.namespace), seed=seed)
        runner = oracle_factory() if agent == "oracle" and oracle_factory else AGENTS.get(agent)()
        result = None
        with anyio.move_on_after(budgets.seconds + GRACE_S) as scope:
            result = await runner.run(task)
        if scope.cancelled_caught or result is None:
            note(f"agent {agent} exceeded its {budgets.seconds:.0f}s budget and was stopped")
            result = AgentResult(stop_reason="budget_seconds")
        return plane.trajectory(result)
