"""The agent phase: open the agent plane, hand the agent its task, enforce the wall-time budget,
and collect the trajectory. The prompt states the task as an on-call SRE gets it: the alert and
the namespace, never the fault."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from sregym.cluster.handle import ClusterHandle
from sregym.apps import DeployedApp, observability
from sregym.conductor.oracle_agent import OracleAgent
from sregym.core.problem import Budgets
from sregym.core.errors import UnknownNameError, UserInputError
from sregym.core.record import AgentInfo
from sregym.core.trajectory import Trajectory

# agents the conductor builds itself, by their name
CONDUCTOR_AGENTS: dict[str, type] = {OracleAgent.name: OracleAgent}


def agent_class(name: str) -> Any:
    """The agent class called ``name``: a privileged one the conductor holds (it needs the fault
    plane, e.g. the oracle), else one from the agent plane's registry (unknown: UnknownNameError)."""
    if name in CONDUCTOR_AGENTS:
        return CONDUCTOR_AGENTS[name]
    from sregym.agentplane.agents import AGENTS

    if name not in AGENTS:
        raise UnknownNameError("agent", name, [*AGENTS.names(), *CONDUCTOR_AGENTS])
    return AGENTS.get(name)


def build_agent(name: str, options: dict[str, Any] | None = None) -> Any:
    """An agent built by name; a privileged one takes no options (the episode binds it after injection)."""
    cls = agent_class(name)
    return cls() if is_privileged(cls) else cls(**(options or {}))


def is_privileged(agent: Any) -> bool:
    """Whether the agent (or its class) runs conductor-side with the fault plane: bound to the
    episode once the faults are in place, and never ranked."""
    return bool(getattr(agent, "privileged", False))


def agent_info(name: str, runner: Any = None) -> AgentInfo:
    """How the record names the agent (``runner``: the built agent, for its model); a privileged
    agent (the oracle) is an upper bound and never ranked, nor is one that says ``leaderboard = False``
    (the replay of a recorded run)."""
    if runner is None:
        try:
            runner = agent_class(name)
        except Exception:  # noqa: BLE001 - an unknown agent is reported when it is built
            return AgentInfo(name=name)
    kind = getattr(runner, "kind", "baseline")
    model = getattr(runner, "model", None)
    return AgentInfo(name=name, kind=kind if kind in ("baseline", "oracle", "llm", "external") else "baseline",
                     model=model if isinstance(model, str) else None,
                     leaderboard=not is_privileged(runner) and getattr(runner, "leaderboard", True) is not False)


def ensure_workbench_image(cluster: ClusterHandle) -> None:
    """The sandbox's image at this checkout, in a local cluster's runtime (cached by input hash, so
    usually a look-up; rebuilt when the tool server's code changed). Other clusters load it themselves."""
    if cluster.provider != "local":
        return
    from sregym.agentplane.sandbox import IMAGE_NAME
    from sregym.cluster.images import build_images

    build_images([IMAGE_NAME], provider="local", cluster=cluster.name)


class AgentSession:
    """The agent plane open on the incident's app, its task prompt rendered and checked: what is
    left is to hand the agent its task (:meth:`run`). Opened by :func:`agent_session`."""

    def __init__(self, plane: Any, prompt: str, *, agent: str, runner: Any, note: Callable[[str], None]):
        self.plane, self.prompt, self.agent, self.runner, self.note = plane, prompt, agent, runner, note

    async def run(self, seed: int) -> Trajectory:
        """Hand the agent its task (its clock starts now) and return what it did."""
        task = self.plane.task(prompt=self.prompt, seed=seed)
        result = await self.plane.run_agent(self.runner, task)
        if result.stop_reason != "submitted" or result.error:
            self.note(f"agent {self.agent} stopped: {result.stop_reason}{': ' + result.error if result.error else ''}")
        return self.plane.trajectory(result)


@asynccontextmanager
async def agent_session(*, agent: str, runner: Any, cluster: ClusterHandle, app: DeployedApp, alert: str,
                        budgets: Budgets, forbidden_words: list[str],
                        note: Callable[[str], None] = lambda m: None,
                        on_server: Callable[[int, str], None] = lambda pid, what: None,
                        on_sandbox: Callable[[str], None] = lambda namespace: None,
                        on_tool_call: Callable[[Any], None] | None = None) -> AsyncIterator[AgentSession]:
    """Open the agent plane on ``app``: nothing in it acts until :meth:`AgentSession.run`, so the
    conductor opens it while the baseline is measured and the faults go in (see ``run_problem``).

    The agent gets a kubeconfig for its API proxy (which acts as the agent's RBAC-limited
    ServiceAccount and hides the fault plane; access revoked on leaving) and the SRE prompt, which
    is checked not to contain ``forbidden_words`` (problem id, injector names). The tool server (and
    an external agent) run in a sandbox namespace that reaches only that proxy. ``on_server(pid,
    what)`` is told each helper process (the API proxy, the metrics view, the tool server) so a
    killed run's processes can be stopped by cleanup; ``on_sandbox(namespace)`` the agent's
    sandbox namespace, before it is created."""
    from sregym.agentplane.budgets import AgentBudgets
    from sregym.agentplane.plane import AgentPlane
    from sregym.agentplane.prompt import check_prompt, render_prompt
    from sregym.agentplane.sandbox import Sandbox
    from sregym.cluster.agent_access import grant_agent_access, revoke_agent_access
    from sregym.cluster.agent_proxy import PROCESS_NAME, AgentApiProxy, PrometheusView, proxy_listen_host, proxy_pki

    plane_budgets = AgentBudgets(**budgets.model_dump())
    await anyio.to_thread.run_sync(ensure_workbench_image, cluster)
    # The agent's API endpoint: the proxy holds the conductor's credentials and acts as the agent's
    # ServiceAccount; the kubeconfig handed on holds only the proxy's per-run token. Metrics go
    # through a view that serves only Prometheus's query API, without the hidden namespace.
    await anyio.to_thread.run_sync(grant_agent_access, cluster.kube, app.namespace)
    try:
        host = proxy_listen_host(cluster)
        proxy = AgentApiProxy(cluster.kube, app.namespace, listen_host=host,
                              pki=await anyio.to_thread.run_sync(proxy_pki, cluster))
        async with AsyncExitStack() as helpers:
            await helpers.enter_async_context(proxy)
            metrics = (await helpers.enter_async_context(PrometheusView(app.prometheus_url, listen_host=host))
                       if app.prometheus_url else None)
            for helper in (proxy, metrics):
                if helper is not None and helper.pid:
                    on_server(helper.pid, PROCESS_NAME)
            assert proxy.kubeconfig is not None
            # -- the sandbox: the tool server (and an external agent) run as pods of a namespace of
            # their own, reaching only the proxy (sregym.agentplane.sandbox)
            sandbox = Sandbox(cluster.kube, proxy.kubeconfig.read_text(),
                              model_egress=list(getattr(runner, "egress", [])), on_namespace=on_sandbox)
            # the tool server is a pod: a port-forward of this host is handed on as its Service's address
            traces_url, logs_url = await anyio.to_thread.run_sync(
                lambda: (observability.for_pods(cluster, app.traces_url), observability.for_pods(cluster, app.logs_url)))
            async with AgentPlane(proxy.kubeconfig, app.namespace, plane_budgets,
                                  prometheus_url=metrics.url if metrics else None,
                                  traces_url=traces_url, logs_url=logs_url, sandbox=sandbox,
                                  on_tool_call=on_tool_call) as plane:
                if plane.server_pid:
                    on_server(plane.server_pid, "sregym.agentplane.server")
                prompt = render_prompt(alert, app.namespace, plane_budgets, metrics=bool(app.prometheus_url),
                                       traces=bool(app.traces_url),
                                       mcp_url=plane.mcp_url if getattr(runner, "prompt_names_server", True) else None)
                try:
                    check_prompt(prompt, forbidden_words)
                except ValueError as e:  # the alert names the problem or a primitive: fix the problem file
                    raise UserInputError(f"{e}; the alert must not give the fault away") from None
                yield AgentSession(plane, prompt, agent=agent, runner=runner, note=note)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: revoke_agent_access(cluster.kube, app.namespace))


async def run_agent(*, seed: int, **session: Any) -> Trajectory:
    """Open the agent plane (:func:`agent_session`, same arguments), run the agent on its task and
    return what it did."""
    async with agent_session(**session) as opened:
        return await opened.run(seed)
