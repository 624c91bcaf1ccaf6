"""``IncidentEnv``: one live incident as a Gymnasium environment.

Each ``reset`` plays a whole run as ``sregym run`` does (deploy or reuse the app, baseline, inject,
open the sealed tool server) on a background event loop, with the policy as the agent; each
``step`` is one tool call through that server; the episode ends when the policy submits
mitigation (``terminated``) or a budget is spent (``truncated``), and the run is graded, recovered
and recorded as any run. ``close`` (and the next ``reset``) ends a run still playing: its faults
are recovered, shielded from cancellation, and its record says ``aborted``. See docs/training.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import gymnasium as gym

from sregym.cluster.handle import ClusterHandle
from sregym.cluster.providers import current_cluster
from sregym.core.settings import RunSettings
from sregym.gym.channel import SUBMISSIONS, ToolChannel, ToolReply, first_of
from sregym.gym.incident import Outcome, play_incident
from sregym.gym.shaping import Shaping
from sregym.gym.spaces import ToolAction, action_space, observation, observation_space, parse_action

SEED_BOUND = 2**31 - 1
GYM_AGENT = "gym"
CLOSE_TIMEOUT = 900.0  # a recover waits for its faults to come off; never forever


class IncidentEnv(gym.Env):
    """A live incident: observation = the prompt, then tool results; action = one tool call.

    ``problem``: the problem id (or YAML path); the generic env takes it in
    ``reset(options={"problem": ...})`` instead. ``settings``: how the run is played (a
    ``RunSettings`` or its dict: noise, windows, budgets; the seed comes from ``reset``).
    ``out_dir``: where run records go. The cluster: ``cluster`` (a handle), else ``kubeconfig`` and
    ``context``, else the last ``sregym cluster up``. ``shaping``: shaped terms (``sregym.gym.shaping``).
    ``namespace``: play the app in this namespace instead of the problem's (a slot namespace, so that
    episodes of one app run side by side: :func:`sregym.gym.make_vector`).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, problem: str | None = None, *, settings: RunSettings | dict[str, Any] | None = None,
                 out_dir: Path | str = "runs", problems_dirs: Sequence[Path | str] = (),
                 kubeconfig: Path | str | None = None, context: str | None = None,
                 cluster: ClusterHandle | None = None, shaping: Sequence[str] = (),
                 namespace: str | None = None) -> None:
        super().__init__()
        self.action_space = action_space()
        self.observation_space = observation_space()
        self._problem = problem
        base = settings if isinstance(settings, RunSettings) else RunSettings.model_validate(settings or {})
        self._settings = base.model_copy(update={"agent": GYM_AGENT})
        self._out_dir = Path(out_dir)
        self._problems_dirs = [Path(p) for p in problems_dirs]
        self._kubeconfig = Path(kubeconfig) if kubeconfig else None
        self._context = context
        self._cluster = cluster
        self._own_cluster = False  # built here at the first reset (and dropped at close), not given
        self._shaping_default = tuple(shaping)
        self._namespace = namespace
        self._portal_cm: Any = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._run: Future | None = None
        self._scope: anyio.CancelScope | None = None
        self._channel: ToolChannel | None = None
        self._shaping = Shaping()
        self._counts = {"actions": 0, "invalid_actions": 0, "wrong_remediations": 0, "tokens": 0}
        self._over = True
        self.last_outcome: Outcome | None = None

    # -- the Gymnasium contract ---------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        options = dict(options or {})
        problem = options.get("problem", self._problem)
        if not problem:
            raise ValueError("no problem: make sregym/<problem_id>-v0, or pass reset(options={'problem': ID})")
        self._end_run()  # a run still playing is aborted and recovered first
        run_seed = seed if seed is not None else int(self.np_random.integers(0, SEED_BOUND))
        settings = self._settings.model_copy(update={"seed": run_seed})
        if options.get("settings"):
            settings = RunSettings.model_validate({**settings.model_dump(), **options["settings"],
                                                   "seed": run_seed, "agent": GYM_AGENT})
        self._shaping = Shaping.from_weights(options.get("shaping", self._shaping_default))
        self._counts = dict.fromkeys(self._counts, 0)
        self.last_outcome = None
        portal = self._open_portal()
        channel = self._channel = portal.call(ToolChannel)
        self._run = portal.start_task_soon(self._host, str(problem), settings, channel)
        portal.call(first_of, channel.opened.wait, channel.finished.wait)
        if not channel.opened.is_set():  # the run failed before the agent phase: say why
            self._over = True
            self._run.result()
            raise RuntimeError("the run ended before the agent phase")
        self._over = False
        info = {"seed": run_seed, "tools": {n: dict(s) for n, s in channel.tools.items()},
                "budgets": channel.budgets.model_dump()}
        return observation(channel.prompt), info

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        if self._over or self._channel is None:
            return (observation("error: the episode is over; call reset()", error=True), 0.0, True, False,
                    self._info())
        channel, parsed = self._channel, parse_action(action)
        budgets = channel.budgets
        assert self._portal is not None
        if time.time() - channel.started_at >= budgets.seconds:
            self._portal.call(channel.stop, "budget_seconds")  # grade now, not after the run's grace
            return self._finish(None, 0.0, truncated=True, reason="budget_seconds")
        reply = self._portal.call(channel.exchange, parsed)
        if reply is None:  # the run's clock cut the agent off while it waited
            return self._finish(None, 0.0, truncated=True, reason="budget_seconds")
        self._count(parsed, reply)
        reward = self._shaping.step(invalid=reply.invalid, wrong=reply.wrong, evidence=reply.evidence)
        if reply.done:
            return self._finish(reply, reward, truncated=False, reason="submitted", tool=parsed.tool)
        spent = self._spent(budgets)
        if spent:
            self._portal.call(channel.stop, spent)
            return self._finish(reply, reward, truncated=True, reason=spent, tool=parsed.tool)
        obs = observation(reply.text, tool=parsed.tool, error=reply.error, structured=reply.structured)
        return obs, reward, False, False, self._info()

    def close(self) -> None:
        """End a run still playing (recovered, shielded) and stop the event loop; safe to call twice."""
        try:
            self._end_run()
        finally:
            if self._own_cluster:  # the next reset (after a `cluster up`, say) builds a new one
                self._cluster, self._own_cluster = None, False
            if self._portal_cm is not None:
                cm, self._portal_cm, self._portal = self._portal_cm, None, None
                cm.__exit__(None, None, None)
        super().close()

    def __del__(self) -> None:  # a dropped env must not leave a fault behind
        try:
            self.close()
        except Exception:  # noqa: BLE001 - the journal lets `sregym cleanup` finish the job
            pass

    # -- inside ------------------------------------------------------------------------------------
    def _open_portal(self) -> anyio.from_thread.BlockingPortal:
        if self._portal is None:
            self._portal_cm = anyio.from_thread.start_blocking_portal()
            self._portal = self._portal_cm.__enter__()
        return self._portal

    def _handle(self) -> ClusterHandle:
        """The cluster's handle, built once for the env's life: each reset reuses its API client (its
        connections and the API's discovery answers), as a suite's cells share one. It holds no run's
        state: every run reads the cluster anew through it."""
        if self._cluster is None:
            self._cluster, self._own_cluster = current_cluster(self._kubeconfig, self._context), True
        return self._cluster

    async def _host(self, problem: str, settings: RunSettings, channel: ToolChannel) -> Outcome | None:
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                return await play_incident(problem, settings, channel, out_dir=self._out_dir,
                                           problems_dirs=self._problems_dirs, cluster=self._handle(),
                                           namespace=self._namespace)
            return None  # aborted: the episode recovered on its way out
        finally:
            channel.finished.set()
            channel.ended.set()

    def _end_run(self) -> None:
        """Abort a run still playing and wait until it recovered; a finished run is left as it is."""
        run, self._run = self._run, None
        self._over = True
        if run is None:
            return
        if not run.done() and self._portal is not None and self._scope is not None:
            self._portal.call(self._scope.cancel)
        try:
            run.result(timeout=CLOSE_TIMEOUT)
        except Exception:  # noqa: BLE001 - its record says what went wrong; recover already ran
            pass

    def _count(self, action: ToolAction, reply: ToolReply) -> None:
        if action.tool not in SUBMISSIONS or action.error is not None:
            self._counts["actions"] += 1
        self._counts["invalid_actions"] += reply.invalid
        self._counts["wrong_remediations"] += reply.wrong
        self._counts["tokens"] += action.tokens

    def _spent(self, budgets: Any) -> str | None:
        if self._counts["actions"] >= budgets.steps:
            return "budget_steps"
        if budgets.tokens and self._counts["tokens"] >= budgets.tokens:
            return "budget_tokens"
        return None

    def _finish(self, reply: ToolReply | None, reward: float, *, truncated: bool, reason: str,
                tool: str = "") -> tuple[dict, float, bool, bool, dict]:
        """Wait for the run's grade (its mitigation window), then the last transition."""
        run, self._run, self._over = self._run, None, True
        outcome = run.result() if run is not None else None
        self.last_outcome = outcome
        if outcome is not None:
            reward += self._shaping.final(outcome.reward)
        text = reply.text if reply is not None else f"the agent's budget is spent ({reason}); the run is graded"
        obs = observation(text, tool=tool, error=reply.error if reply else True,
                          structured=reply.structured if reply else None)
        return obs, reward, not truncated, truncated, self._info(outcome, reason)

    def _info(self, outcome: Outcome | None = None, reason: str | None = None) -> dict[str, Any]:
        """Metrics only: counts and, at the end, the run's reward terms; never the ground truth."""
        info: dict[str, Any] = {"steps": self._counts["actions"], "invalid_actions": self._counts["invalid_actions"],
                                "tokens": self._counts["tokens"]}
        # Whether a write hit a component outside the root cause's scope tells the policy about the
        # ground truth mid-episode: it is reported only when the caller shapes on it (a training choice).
        if "wrong_remediation" in self._shaping.terms:
            info["wrong_remediations"] = self._counts["wrong_remediations"]
        if reason is not None:
            info["stop_reason"] = reason
        if outcome is not None:
            info.update({"run_id": outcome.run_id, "reward": outcome.reward, "reward_terms": dict(outcome.terms),
                         "mitigation_passed": outcome.mitigation_passed, "diagnosis_passed": outcome.diagnosis_passed,
                         "status": outcome.status, "ttm_s": outcome.ttm_s})
        return info
