"""The Gymnasium env on the live cluster, with the tiny test problem (a ConfigMap key drifted):
reset plays a real run to the agent phase, steps are tool calls through the sealed server, the fix
and submit_mitigation end it with the run's own reward and record; and close after a partial
episode recovers the fault and closes the journal. The attack runs alongside: nothing the policy
holds (observations, info, the env's attributes) carries the problem or its ground truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


def comparable(record: RunRecord) -> dict:
    """What the seed and the actions decide in a record: the problem, its faults and mechanisms, the
    noise planned (kind, injector, target, when), the calls and their verdicts, the submissions and
    the grades; not wall-clock times, run ids or the agent's name."""
    return {"problem": (record.problem_id, record.spec_hash, record.seed, record.noise, record.namespace),
            "mechanisms": record.mechanisms,
            "timeline": sorted((e.kind, e.action, e.name, e.injector, e.target, round(e.at)) for e in record.timeline),
            "calls": [(c.tool, c.arguments, c.invalid, c.read_only, c.verb, c.error is None)
                      for c in record.trajectory.tool_calls],
            "submissions": [(s.kind, s.text, s.fields) for s in record.trajectory.submissions],
            "stop": record.trajectory.stop_reason,
            "mitigation": [(c.name, c.passed) for c in record.grades.mitigation.checks],
            "reward": record.grades.reward.total}


def test_a_gym_episode_and_sregym_run_with_the_same_seed_and_actions_make_the_same_record(cluster, tmp_path):
    # the noisy tiny problem: seeded pod and rolling restarts from the page on, so the seed's noise
    # plan is part of what must match
    env = IncidentEnv("tiny_settings_drift_noisy", problems_dirs=[CONDUCTOR / "problems"], cluster=cluster,
                      out_dir=tmp_path / "gym", settings={"noise": True, "baseline_window": 1, "grade_window": 3,
                                                          "verify_timeout": 30,
                                                          "charts_dirs": [str(CONDUCTOR / "charts")]})
    try:
        env.reset(seed=5)
        env.step(call("kubectl", command=["get", "configmap", "tiny-settings", "-n", "tiny", "-o", "yaml"]))
        env.step(call("kubectl", command=["patch", "configmap", "tiny-settings", "-n", "tiny", "-p",
                                          '{"data": {"greeting": "hello"}}']))
        env.step(call("submit_diagnosis", text="tiny-settings greeting drifted to goodbye", component="tiny-settings"))
        *_, info = env.step(call("submit_mitigation"))
    finally:
        env.close()
    gym_record = RunRecord.model_validate_json(Path(env.last_outcome.record).read_text())
    assert gym_record.agent.name == "gym" and info["mitigation_passed"] is True

    # the same actions, replayed by `sregym run` itself with the same seed
    settings = tmp_path / "settings.yaml"
    settings.write_text(json.dumps({"agent": "replay", "agent_options": {"actions": env.last_outcome.record}}))
    proc = subprocess.run(
        [sys.executable, "-m", "sregym", "run", "--problem", "tiny_settings_drift_noisy", "--settings", str(settings),
         "--seed", "5", "--noise", "on", "--out", str(tmp_path / "run"), "--problems-dir", str(CONDUCTOR / "problems"),
         "--charts-dir", str(CONDUCTOR / "charts"), "--kubeconfig", str(cluster.kubeconfig), "--baseline-window", "1",
         "--grade-window", "3", "--verify-timeout", "30"],
        env={**os.environ, "SREGYM_STATE": str(tmp_path / "state")}, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_record = RunRecord.model_validate_json(next((tmp_path / "run").glob("*.json")).read_text())
    assert run_record.agent.name == "replay" and run_record.agent.leaderboard is False
    assert [e for e in gym_record.timeline if e.kind == "noise"], "the seed planned no noise: nothing was compared"
    assert comparable(run_record) == comparable(gym_record)
    assert greeting(cluster) == "hello"


def test_two_episodes_of_one_app_run_side_by_side_in_slot_namespaces(cluster, tmp_path):
    from sregym.gym import make_vector

    envs = make_vector("tiny_settings_drift", 2, problems_dirs=[CONDUCTOR / "problems"], out_dir=tmp_path / "runs",
                       kubeconfig=cluster.kubeconfig, context=cluster.context,
                       settings={"noise": False, "baseline_window": 1, "grade_window": 3, "verify_timeout": 30,
                                 "charts_dirs": [str(CONDUCTOR / "charts")]})
    spaces = ["tiny", "tiny-p1"]

    def both(tool: str, per_namespace) -> dict:
        actions = [call(tool, **per_namespace(ns)) for ns in spaces]
        return {"tool": tuple(a["tool"] for a in actions), "arguments": tuple(a["arguments"] for a in actions)}

    try:
        t0 = time.monotonic()
        obs, info = envs.reset(seed=[3, 4])
        reset_s = time.monotonic() - t0
        assert ["`tiny`" in obs["text"][0], "`tiny-p1`" in obs["text"][1]] == [True, True]
        for ns in spaces:  # each slot has its own release, its own fault
            assert cluster.kube.core.read_namespaced_config_map("tiny-settings", ns).data["greeting"] == "goodbye"
        envs.step(both("kubectl", lambda ns: {"command": ["patch", "configmap", "tiny-settings", "-n", ns, "-p",
                                                          '{"data": {"greeting": "hello"}}']}))
        envs.step(both("submit_diagnosis", lambda ns: {"text": "tiny-settings greeting changed", "component": "tiny-settings"}))
        obs, reward, term, trunc, info = envs.step(both("submit_mitigation", lambda ns: {}))
        assert list(term) == [True, True] and list(info["mitigation_passed"]) == [True, True]
        print(f"vector reset of 2 episodes {reset_s:.1f}s")
    finally:
        envs.close()
    records = [RunRecord.model_validate_json(p.read_text()) for p in (tmp_path / "runs").glob("*.json")]
    assert sorted((r.namespace, r.status, r.seed) for r in records) == [("tiny", "completed", 3),
                                                                         ("tiny-p1", "completed", 4)]
    spans = {r.run_id: (r.started_at, r.ended_at) for r in records}
    (a0, a1), (b0, b1) = spans.values()
    assert a0 < b1 and b0 < a1, f"the episodes did not overlap: {spans}"
    for r in records:
        assert read_journal(journal_dir() / "closed" / f"{r.run_id}.jsonl").closed
    cluster.kube.core.delete_namespace("tiny-p1")  # the slot's release; the shared tiny stays


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


@pytest.mark.long  # ~150 s (12 live episodes): the example's loop end to end; CI runs its logic in tests/unit/gym
def test_the_runbook_bandit_example_learns_on_live_episodes(cluster, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("runbook_bandit", Path(__file__).parents[3] / "examples" / "runbook_bandit.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.main(["--episodes", "6", "--epsilon", "0", "--out", str(tmp_path),
                            "--kubeconfig", str(cluster.kubeconfig)])
    bandit, pick = results["bandit"], results["random pick"]
    # entries tried until one paid more than the optimism (four at most); then that one, every time
    assert [r["mitigated"] for r in bandit[4:]] == [True, True]
    assert sum(r["return"] for r in bandit) > sum(r["return"] for r in pick)
    assert (tmp_path / "returns.png").is_file()
    assert greeting(cluster) == "hello"


def test_the_runbook_bandit_learns_each_alerts_fix_on_live_episodes_of_the_lite_suite(cluster, tmp_path):
    """The example's loop in CI, on two problems of the lite suite in turn (hotel_geo_selector_mismatch,
    hotel_rate_bad_image_tag: one app, so fast reset between them), four episodes a policy. The
    runbook holds one fix per incident and offers both on every alert; the bandit keeps a table per
    alert, so whatever it tries first on an alert, its second episode of that alert plays the fix;
    the random pick (seeded: one fix in four) earns less."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("runbook_bandit", Path(__file__).parents[3] / "examples" / "runbook_bandit.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    t0 = time.monotonic()
    results = example.main(["--incidents", "lite", "--episodes", "4", "--epsilon", "0", "--out", str(tmp_path),
                            "--kubeconfig", str(cluster.kubeconfig)])
    print(f"lite bandit: 8 live episodes in {time.monotonic() - t0:.0f}s")
    bandit, pick = results["bandit"], results["random pick"]
    lite = example.INCIDENT_SETS["lite"]["problems"]
    fix = {"hotel_geo_selector_mismatch": "restore the geo Service's selector",
           "hotel_rate_bad_image_tag": "set rate's image to its siblings'"}
    assert [r["problem"] for r in bandit] == [lite[i % 2] for i in range(4)] and set(lite) == set(fix)
    # each incident's fix mitigates it, the other incident's fix does not
    assert all(r["mitigated"] == (r["entry"] == fix[r["problem"]]) for r in bandit + pick)
    for problem in lite:  # learned, per alert: its second episode plays the entry that paid there
        first, second = [r for r in bandit if r["problem"] == problem]
        assert second["entry"] == fix[problem] and second["mitigated"] is True
        assert first["alert"] == second["alert"]
    assert bandit[0]["alert"] != bandit[1]["alert"]  # two alerts, two tables
    assert sum(r["return"] for r in bandit) > sum(r["return"] for r in pick)
    assert (tmp_path / "returns.png").is_file()
    svc = cluster.kube.core.read_namespaced_service("geo", "hotel-reservation")
    assert svc.spec.selector == {"app.kubernetes.io/name": "geo", "app.kubernetes.io/instance": "hotel-reservation"}
    images = {d: cluster.kube.apps.read_namespaced_deployment(d, "hotel-reservation").spec.template.spec.containers[0].image
              for d in ("rate", "search")}
    assert images["rate"] == images["search"] and ":2.4.1" not in images["rate"]
