"""The env's contract over a fake conductor side (the run replaced by a script that answers each
action): the seed flows into the run's settings, budgets truncate, submit terminates with the
run's reward, shaped rewards sum to it, and close aborts a run still playing after it recovered."""

from __future__ import annotations

import time

import anyio
import pytest

import sregym.gym.env as env_module
from sregym.agentplane.budgets import AgentBudgets
from sregym.gym.channel import ToolReply
from sregym.gym.env import IncidentEnv
from sregym.gym.incident import Outcome

KUBECTL = {"tool": "kubectl", "arguments": '{"command": "get pods -n tiny"}'}
SUBMIT = {"tool": "submit_mitigation", "arguments": ""}


@pytest.fixture()
def runs(monkeypatch):
    """The fake run: every settings it was given, and whether it recovered on the way out."""
    seen = {"settings": [], "recovered": 0, "aborted": 0}

    async def fake_play(problem, settings, channel, **kw):
        seen["settings"].append(settings)
        try:
            channel.prompt, channel.budgets = f"alert in `tiny` (seed-independent)", AgentBudgets(steps=3, seconds=60)
            channel.tools = {"kubectl": {"type": "object"}, "submit_mitigation": {"type": "object"}}
            channel.started_at = time.time()
            channel.opened.set()
            covered = 0.0  # the first valid kubectl call gathers the run's only evidence entry
            async for action in channel._actions:
                if isinstance(action, str):
                    break
                invalid = int(action.error is not None or action.tool not in channel.tools)
                gain = 1.0 - covered if action.tool == "kubectl" and not invalid else 0.0
                covered += gain
                reply = ToolReply(text=f"ran {action.tool}", error=bool(invalid), invalid=invalid, evidence=gain,
                                  done=action.tool == "submit_mitigation")
                await channel._replies_in.send(reply)
                if reply.done:
                    break
            channel.ended.set()
            return Outcome(run_id="r1", reward=0.5, terms={"diagnosis": 0.0}, mitigation_passed=True)
        except anyio.get_cancelled_exc_class():
            seen["aborted"] += 1
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.05)
                seen["recovered"] += 1

    monkeypatch.setattr(env_module, "play_incident", fake_play)
    return seen


def test_the_seed_flows_into_the_runs_settings_and_unseeded_resets_follow_it(runs) -> None:
    env = IncidentEnv("p")
    try:
        obs1, info = env.reset(seed=123)
        assert runs["settings"][-1].seed == 123 and info["seed"] == 123 and runs["settings"][-1].agent == "gym"
        env.reset()
        first_unseeded = runs["settings"][-1].seed
        obs3, _ = env.reset(seed=123)
        env.reset()
        assert runs["settings"][-1].seed == first_unseeded  # reproducible from the seeded reset
        assert obs1 == obs3 and obs1 in env.observation_space
    finally:
        env.close()
    assert runs["recovered"] == 4 and runs["aborted"] == 4  # each reset and close ended the run before


def test_submit_terminates_with_the_runs_reward_and_shaping_keeps_the_return(runs) -> None:
    env = IncidentEnv("p", shaping=["invalid_action"])
    try:
        env.reset(seed=1)
        rewards = []
        obs, r, term, trunc, info = env.step({"tool": "nope", "arguments": "{"})
        rewards.append(r)
        assert obs["error"] == 1 and r == pytest.approx(-0.02) and not (term or trunc) and info["invalid_actions"] == 1
        obs, r, term, trunc, info = env.step(SUBMIT)
        rewards.append(r)
        assert term and not trunc and info["reward"] == 0.5 and info["mitigation_passed"] is True
        assert sum(rewards) == pytest.approx(0.5)
        obs, r, term, trunc, _ = env.step(KUBECTL)  # after the end: an error to read, never an exception
        assert obs["error"] == 1 and term and r == 0.0
    finally:
        env.close()
    assert runs["aborted"] == 0 and runs["recovered"] == 1


def test_evidence_coverage_pays_its_gain_at_the_step_and_the_last_step_the_rest(runs) -> None:
    env = IncidentEnv("p", shaping=["evidence_coverage", "invalid_action"])
    try:
        env.reset(seed=1)
        steps = [env.step(KUBECTL), env.step(KUBECTL), env.step(SUBMIT)]
        rewards = [r for _, r, _, _, _ in steps]
        assert rewards[:2] == pytest.approx([0.15, 0.0])  # the record's evidence weight times the gain
        assert sum(rewards) == pytest.approx(0.5)  # the run's reward, whatever was paid on the way
        assert all("evidence" not in k for _, _, _, _, info in steps[:2] for k in info)  # the reward is all it says
    finally:
        env.close()


def test_check_env_passes_with_every_shaped_term(runs) -> None:
    from gymnasium.utils.env_checker import check_env

    env = IncidentEnv("p", shaping=["evidence_coverage", "invalid_action", "wrong_remediation"])
    try:
        check_env(env, skip_render_check=True)  # the live form: tests/integration/gym (long tier)
    finally:
        env.close()


def test_the_step_budget_truncates_and_the_run_is_graded(runs) -> None:
    env = IncidentEnv("p")
    try:
        env.reset(seed=1)
        results = [env.step(KUBECTL) for _ in range(3)]
        assert [(t, tr) for _, _, t, tr, _ in results] == [(False, False), (False, False), (False, True)]
        assert results[-1][4]["stop_reason"] == "budget_steps" and results[-1][1] == 0.5
    finally:
        env.close()


def test_a_reset_without_a_problem_says_how_to_name_one() -> None:
    env = IncidentEnv()
    with pytest.raises(ValueError, match="options=\\{'problem'"):
        env.reset()
    env.close()


def test_the_time_budget_truncates_without_waiting_for_the_runs_grace(runs) -> None:
    env = IncidentEnv("p")
    try:
        env.reset(seed=1)
        env._channel.started_at -= 120  # the 60 s budget is spent
        t0 = time.monotonic()
        obs, reward, term, trunc, info = env.step(KUBECTL)
        assert trunc and not term and info["stop_reason"] == "budget_seconds" and reward == 0.5
        assert time.monotonic() - t0 < 5 and "budget is spent" in obs["text"]
    finally:
        env.close()


def test_the_cluster_handle_is_built_once_for_the_envs_resets_and_dropped_at_close(runs, monkeypatch) -> None:
    built, seen = [], []

    def handle(kubeconfig, context):
        built.append((kubeconfig, context))
        return object()

    fake_play = env_module.play_incident

    async def play(problem, settings, channel, **kw):
        seen.append(kw["cluster"])
        return await fake_play(problem, settings, channel, **kw)

    monkeypatch.setattr(env_module, "current_cluster", handle)
    monkeypatch.setattr(env_module, "play_incident", play)
    env = IncidentEnv("p", kubeconfig="/k", context="c")
    try:
        env.reset(seed=1)
        env.reset(seed=2)
    finally:
        env.close()
    assert len(built) == 1 and built[0][1] == "c" and seen[0] is seen[1]
    env.reset(seed=3)  # a reset after close starts afresh: the cluster may have been brought up again
    env.close()
    assert len(built) == 2 and seen[2] is not seen[0]


def test_a_cluster_handle_given_to_the_env_is_used_as_it_is(runs, monkeypatch) -> None:
    given, seen = object(), []
    fake_play = env_module.play_incident

    async def play(problem, settings, channel, **kw):
        seen.append(kw["cluster"])
        return await fake_play(problem, settings, channel, **kw)

    monkeypatch.setattr(env_module, "current_cluster", lambda *a: pytest.fail("a handle was given"))
    monkeypatch.setattr(env_module, "play_incident", play)
    env = IncidentEnv("p", cluster=given)
    try:
        env.reset(seed=1)
    finally:
        env.close()
    env.reset(seed=2)
    env.close()
    assert seen == [given, given]
