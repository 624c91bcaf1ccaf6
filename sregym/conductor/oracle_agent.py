"""The ``oracle`` agent: an upper bound, never ranked. It applies the problem's own recovery
through the fault plane, then submits the ground truth through the MCP submit tools, so its run is
recorded exactly like any agent's (``agent.kind = "oracle"``, ``leaderboard = false``).

It lives in the conductor, not the agent plane, because it needs the fault plane and the ground
truth, which the agent plane must never reach: it is ``privileged``, so the conductor builds it
itself and binds it to the episode once the faults are in place.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
import anyio.to_thread

from sregym.conductor.faultplane import FaultPlane
from sregym.core.problem import GroundTruth

if TYPE_CHECKING:
    from sregym.conductor.episode import Episode


class OracleAgent:
    """Recovers the run's faults (newest first), waits for health, submits the ground truth."""

    name: ClassVar[str] = "oracle"
    kind: ClassVar[str] = "oracle"
    # built by the conductor, bound to the episode after injection, never ranked
    privileged: ClassVar[bool] = True

    def __init__(self, plane: FaultPlane | None = None, ground_truth: GroundTruth | None = None,
                 health: Any = None, health_timeout: float = 300.0):
        self.plane = plane
        self.ground_truth = ground_truth
        self.health = health  # callable -> (ok, detail); None skips the wait
        self.health_timeout = health_timeout

    def bind(self, episode: Episode) -> None:
        """Take the episode's fault plane, ground truth and app health (once its faults are in place)."""
        self.plane, self.ground_truth = episode.plane, episode.problem.ground_truth
        driver, app, cluster = episode.driver, episode.app, episode.cluster
        self.health = lambda: driver.health(app, cluster)

    def diagnosis_arguments(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Arguments for ``submit_diagnosis`` as its input schema names them: the free text under
        ``text`` (or its first required field), plus structured fields the tool accepts."""
        gt = self.ground_truth
        assert gt is not None, "bind() first"
        accepted = list(schema.get("properties", {}))
        main = "text" if "text" in accepted or not accepted else (schema.get("required") or accepted)[0]
        args: dict[str, Any] = {main: gt.root_cause}
        optional = {"component": gt.component, "mechanism": gt.mechanism, "details": "; ".join(gt.details)}
        args.update({k: v for k, v in optional.items() if k in accepted and v and k != main})
        return args

    async def _wait_healthy(self) -> None:
        if self.health is None:
            return
        deadline = time.monotonic() + self.health_timeout
        while time.monotonic() < deadline:
            ok, _ = await anyio.to_thread.run_sync(self.health)
            if ok:
                return
            await anyio.sleep(3)

    async def run(self, task: Any) -> Any:
        from sregym.agentplane.agents import AgentResult
        from sregym.agentplane.agents.base import connect

        assert self.plane is not None, "bind() first"
        for key in reversed(self.plane.order):
            if self.plane.active[key].intent.kind == "fault":
                await self.plane.stop(key)
        await self._wait_healthy()
        async with connect(task) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            schema = getattr(tools.get("submit_diagnosis"), "input_schema", None) or {}
            await client.call_tool("submit_diagnosis", self.diagnosis_arguments(schema))
            await client.call_tool("submit_mitigation", {})
        return AgentResult(stop_reason="submitted")
