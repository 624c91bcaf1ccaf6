"""The attack first: a policy (or whoever holds the env) looks through info, observations and the
env's attributes for the problem's ground truth. The env never holds the problem: it is loaded
conductor-side (sregym.gym.incident), and only counts and the reward come back."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym

import sregym.gym  # noqa: F401 - registers the envs
from sregym.core.problem import GroundTruth, Problem
from sregym.core.record import (AgentInfo, CheckResult, DiagnosisGrade, Grades, MitigationGrade, Reward, RunRecord, Versions)
from sregym.core.trajectory import Trajectory
from sregym.gym.incident import Outcome
from reachable import reachable

ROOT_CAUSE = "The tiny-settings ConfigMap key 'greeting' was changed from hello to goodbye."


def test_a_made_env_holds_no_problem_and_names_only_what_it_was_given() -> None:
    env = gym.make("sregym/hotel_geo_cpu_pressure-v0")
    held = list(reachable(env))
    assert not [o for o in held if isinstance(o, (Problem, GroundTruth))]
    env.close()


def test_the_outcome_keeps_the_reward_not_the_graders_evidence() -> None:
    record = RunRecord(run_id="r1", problem_id="tiny_settings_drift", spec_hash="h", app="tinyapp", namespace="tiny",
                       agent=AgentInfo(name="gym"), seed=1, noise=False, difficulty="easy",
                       versions=Versions(sregym="0"), trajectory=Trajectory(),
                       grades=Grades(
                           diagnosis=DiagnosisGrade(oracle="checklist_judge", judged=True, passed=False, score=0.5,
                                                    errors=[ROOT_CAUSE]),
                           mitigation=MitigationGrade(passed=False, checks=[CheckResult(
                               name="configmap_value", passed=False, message=f"want hello: {ROOT_CAUSE}",
                               evidence={"root_cause": ROOT_CAUSE})]),
                           reward=Reward(total=0.2, terms={"diagnosis": 0.5, "mitigation": 0.0}),
                           wrong_remediations=["kubectl delete configmap tiny-settings"]))
    outcome = Outcome.of(record, Path("/tmp/r1.json"))
    strings = [o for o in reachable(outcome) if isinstance(o, str)]
    assert not [s for s in strings if "greeting" in s or "tiny-settings" in s]
    assert outcome.reward == 0.2 and outcome.terms == {"diagnosis": 0.5, "mitigation": 0.0}


def test_info_reports_wrong_remediations_only_when_the_caller_shapes_on_them() -> None:
    # a write's "wrong" verdict says the target is outside the root cause's scope: a hint about the
    # ground truth mid-episode, so it is reported only as the shaping the caller asked for
    from sregym.gym.env import IncidentEnv
    from sregym.gym.shaping import Shaping

    env = IncidentEnv("tiny_settings_drift")
    env._counts["wrong_remediations"] = 2
    assert "wrong_remediations" not in env._info()
    env._shaping = Shaping.from_weights(["wrong_remediation"])
    assert env._info()["wrong_remediations"] == 2
    env.close()
