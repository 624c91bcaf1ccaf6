"""The Gymnasium env on the live cluster, with the tiny test problem (a ConfigMap key drifted):
reset plays a real run to the agent phase, steps are tool calls through the sealed server, the fix
and submit_mitigation end it with the run's own reward and record; and close after a partial
episode recovers the fault and closes the journal. The attack runs alongside: nothing the policy
holds (observations, info, the env's attributes) carries the problem or its ground truth."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sregym.conductor.journal import journal_dir, read_journal
from sregym.core.problem import GroundTruth, Problem
from sregym.core.record import RunRecord
from sregym.gym import IncidentEnv
from reachable import reachable

CONDUCTOR = Path(__file__).parent.parent / "conductor"
NAMESPACE = "tiny"
pytestmark = pytest.mark.cluster
# what the env must never hold: the ground truth's words; what the policy reads must not name the
# problem or the injector either (the env holds the id its caller made it with, as its spec does)
TRUTH = ("was changed from hello to goodbye", "configuration value changed")
TELLS = (*TRUTH, "tiny_settings_drift", "config_value")


def make_env(cluster, tmp_path: Path) -> IncidentEnv:
    return IncidentEnv("tiny_settings_drift", problems_dirs=[CONDUCTOR / "problems"], cluster=cluster,
                       out_dir=tmp_path / "runs", shaping=["invalid_action"],
                       settings={"noise": False, "baseline_window": 1, "grade_window": 3, "verify_timeout": 30,
                                 "charts_dirs": [str(CONDUCTOR / "charts")]})


def call(tool: str, **arguments) -> dict:
    return {"tool": tool, "arguments": json.dumps(arguments)}


def assert_nothing_tells(env: IncidentEnv, *seen: object) -> None:
    held = list(reachable(env))
    assert not [o for o in held if isinstance(o, (Problem, GroundTruth, RunRecord))]
    assert not [t for t in held if isinstance(t, str) for tell in TRUTH if tell in t]
    read = [o for s in seen for o in reachable(s) if isinstance(o, str)]
    assert not [t for t in read for tell in TELLS if tell in t]


def greeting(cluster) -> str:
    return cluster.kube.core.read_namespaced_config_map("tiny-settings", NAMESPACE).data["greeting"]


def test_an_episode_is_a_run_reset_steps_submit_reward_and_close_recovers(cluster, tmp_path):
    env = make_env(cluster, tmp_path)
    try:
        t0 = time.monotonic()
        obs, info = env.reset(seed=3)
        reset_s = time.monotonic() - t0
        assert obs in env.observation_space and "wrong greeting" in obs["text"] and "`tiny`" in obs["text"]
        assert {"kubectl", "submit_diagnosis", "submit_mitigation"} <= set(info["tools"]) and info["seed"] == 3
        assert greeting(cluster) == "goodbye"  # the fault is in place

        obs, reward, term, trunc, info = env.step(call("kubectl", command="get pods -n tiny"))
        assert not obs["error"] and "tiny" in obs["text"] and (reward, term, trunc) == (0.0, False, False)
        obs, reward, term, trunc, info = env.step({"tool": "kubectl", "arguments": "get pods"})  # not JSON
        assert obs["error"] and "not JSON" in obs["text"] and reward < 0 and info["invalid_actions"] == 1
        obs, *_ = env.step(call("kubectl", command="get configmap tiny-settings -n tiny -o jsonpath={.data}"))
        assert "goodbye" in obs["text"]
        obs, *_ = env.step(call("kubectl", command=["patch", "configmap", "tiny-settings", "-n", "tiny", "-p",
                                                    '{"data": {"greeting": "hello"}}']))
        assert not obs["error"], obs["text"]
        env.step(call("submit_diagnosis", text="the tiny-settings ConfigMap's greeting was changed to goodbye",
                      component="tiny-settings"))
        assert_nothing_tells(env, obs, info)
        obs, reward, term, trunc, info = env.step(call("submit_mitigation"))
        assert (term, trunc) == (True, False) and info["mitigation_passed"] is True and info["stop_reason"] == "submitted"
        record = RunRecord.model_validate_json(Path(env.last_outcome.record).read_text())
        # the run's own record: its reward is the episode's return (the shaped penalty was paid early)
        assert record.agent.name == "gym" and record.seed == 3 and record.status == "completed"
        assert info["reward"] == record.grades.reward.total and reward == pytest.approx(
            record.grades.reward.total + 0.02)  # -0.02 was paid at the invalid step
        assert [c.tool for c in record.trajectory.tool_calls][:1] == ["kubectl"]
        assert record.trajectory.invalid_actions == 1
        assert_nothing_tells(env, obs, info)
        print(f"reset {reset_s:.1f}s")

        # a partial episode, then close: the fault comes off, the journal is closed, the record says aborted
        env.reset(seed=4)
        assert greeting(cluster) == "goodbye"
        env.step(call("kubectl", command="get pods -n tiny"))
    finally:
        env.close()
    env.close()  # twice is fine
    assert greeting(cluster) == "hello"
    records = [RunRecord.model_validate_json(p.read_text()) for p in (tmp_path / "runs").glob("*.json")]
    assert sorted(r.status for r in records) == ["aborted", "completed"]
    for r in records:  # both runs' journals closed: every fault came off, nothing left for cleanup
        assert not (journal_dir() / f"{r.run_id}.jsonl").exists()
        assert read_journal(journal_dir() / "closed" / f"{r.run_id}.jsonl").closed


@pytest.mark.long  # ~95 s (eleven resets, each a run to the agent phase): too dear for CI's budget
def test_check_env_passes_on_the_live_cluster(cluster, tmp_path):
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    # by kubeconfig, not a cluster handle: check_env makes the env again from its spec (kwargs deep-copied)
    env = gym.make("sregym/Incident-v0", problem="tiny_settings_drift", problems_dirs=[CONDUCTOR / "problems"],
                   kubeconfig=cluster.kubeconfig, context=cluster.context, out_dir=tmp_path / "runs",
                   settings={"noise": False, "baseline_window": 1, "grade_window": 3, "verify_timeout": 30,
                             "charts_dirs": [str(CONDUCTOR / "charts")]})
    try:
        t0 = time.monotonic()
        check_env(env.unwrapped)  # about ten seeded resets, each a run to the agent phase, and a few steps
        print(f"check_env {time.monotonic() - t0:.1f}s")
    finally:
        env.close()
    assert greeting(cluster) == "hello"
    records = [RunRecord.model_validate_json(p.read_text()) for p in (tmp_path / "runs").glob("*.json")]
    assert records and {r.status for r in records} == {"aborted"}
    assert {r.seed for r in records} >= {123}
    for r in records:
        assert read_journal(journal_dir() / "closed" / f"{r.run_id}.jsonl").closed
