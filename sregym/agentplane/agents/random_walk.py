"""``random``: seeded, valid, read-only tool calls within the step budget, then a submission.

A floor that shows what blind exploration earns: every call is well formed (real kubectl verbs on
the task's namespace, real metric names, real log queries), none is informed.
"""

from __future__ import annotations

import random
from typing import Any

from sregym.agentplane.agents.base import Agent, AgentResult, AgentTask, agent, connect, submit
from sregym.core.seeds import derive_seed

# Metrics cAdvisor/kubelet and kube-state-metrics expose on any cluster Prometheus scrapes.
METRICS = ("up", "container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
           "kube_pod_container_status_restarts_total", "kube_deployment_status_replicas_available")
KINDS = ("pods", "deployments", "services", "events", "configmaps", "replicasets", "endpoints")


def choose_call(rng: random.Random, namespace: str, tools: set[str]) -> tuple[str, dict[str, Any]]:
    """One random valid read-only call among the tools the server offers."""
    options = ["kubectl_get", "kubectl_describe"]
    if "query_logs" in tools:
        options.append("query_logs")
    if "query_metrics" in tools:
        options.append("query_metrics")
    pick = rng.choice(options)
    if pick == "kubectl_get":
        return "kubectl", {"command": ["get", rng.choice(KINDS), "-n", namespace, "-o", "wide"]}
    if pick == "kubectl_describe":
        return "kubectl", {"command": ["describe", rng.choice(("pods", "deployments", "services")), "-n", namespace]}
    if pick == "query_logs":
        return "query_logs", {"namespace": namespace, "since": rng.choice(("5m", "15m", "1h")),
                              "limit": rng.choice((20, 50, 100))}
    metric = rng.choice(METRICS)
    return "query_metrics", {"query": f'{metric}{{namespace="{namespace}"}}' if metric != "up" else metric}


@agent("random")
class RandomAgent(Agent):
    """Spends its step budget on seeded random valid read-only calls, then submits "no diagnosis"."""

    def __init__(self, steps: int | None = None) -> None:
        self.steps = steps

    async def run(self, task: AgentTask) -> AgentResult:
        rng = random.Random(derive_seed(task.seed, "agent", "random"))
        steps = min(self.steps or task.budgets.steps, task.budgets.steps)
        async with connect(task) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            for _ in range(steps):
                if task.elapsed() >= task.budgets.seconds:
                    break
                name, args = choose_call(rng, task.namespace, tools)
                await client.call_tool(name, args)
            await submit(client, "no diagnosis")
        return AgentResult(stop_reason="submitted")
