"""Shaped rewards move credit earlier and never change the return: whatever was paid on the
way, the episode's rewards sum to the run's reward, with the record's weights and caps. The
evidence-coverage gain is the record's metric, step by step, judged on the conductor's side."""

from __future__ import annotations

import pytest

from sregym.core.problem import GroundTruth
from sregym.core.trajectory import ToolCall, Trajectory
from sregym.gym.channel import ToolChannel
from sregym.gym.incident import call_judge
from sregym.gym.shaping import Shaping, UnknownShapingTerm, shaped_terms
from sregym.oracles import evidence_coverage, load_reward_weights

GT = GroundTruth(root_cause="geo's DATABASE_URL points at the wrong port", component="geo",
                 mechanism="misconfigured env var", scope=["geo", "frontend"],
                 evidence=["logs:geo", "config:deployment/geo", "metrics:postgres", "traces:frontend"])


def kubectl(t: float, command: str, **kw) -> ToolCall:
    verb = command.split()[0]
    return ToolCall(t=t, tool="kubectl", arguments={"command": command}, verb=verb,
                    read_only=verb in ("get", "describe", "logs", "top"), **kw)


def gains(calls: list[ToolCall], ground_truth: GroundTruth = GT) -> list[float]:
    """The evidence gain the conductor hands the channel for each call, as the server records them."""
    channel, seen = ToolChannel(), []
    judge = call_judge(channel, ground_truth)
    for call in calls:
        channel.evidence_seen = 0.0  # the agent clears it before each call
        judge(call)
        seen.append(channel.evidence_seen)
    return seen


def test_no_shaping_pays_everything_at_the_end() -> None:
    s = Shaping.from_weights(())
    assert s.step(invalid=3, wrong=2) == 0.0
    assert s.final(0.42) == pytest.approx(0.42)


def test_invalid_actions_pay_the_record_penalty_per_action_up_to_its_cap() -> None:
    p = load_reward_weights().penalties
    s = Shaping.from_weights(["invalid_action"])
    rewards = [s.step(invalid=1) for _ in range(int(p.invalid_action_cap / p.invalid_action) + 5)]
    assert rewards[0] == pytest.approx(-p.invalid_action)
    assert sum(rewards) == pytest.approx(-p.invalid_action_cap)  # capped as the record caps it
    assert rewards[-1] == 0.0
    assert s.step(wrong=1) == 0.0  # wrong remediations were not asked for


def test_the_return_equals_the_runs_reward_whatever_was_shaped() -> None:
    s = Shaping.from_weights(["invalid_action", "wrong_remediation"])
    p = load_reward_weights().penalties
    steps = [s.step(invalid=1), s.step(wrong=1), s.step(invalid=1, wrong=1), s.step()]
    assert steps[1] == pytest.approx(-p.wrong_remediation)
    total = 0.31
    assert sum(steps) + s.final(total) == pytest.approx(total)


def test_an_unknown_term_names_the_known_ones() -> None:
    with pytest.raises(UnknownShapingTerm, match="known: evidence_coverage, invalid_action, wrong_remediation"):
        shaped_terms(["evidence_gain"])


def test_evidence_coverage_pays_the_records_evidence_weight_per_share_gained() -> None:
    w = load_reward_weights().weights.evidence
    s = Shaping.from_weights(["evidence_coverage"])
    steps = [s.step(evidence=0.25), s.step(), s.step(evidence=0.5, invalid=1), s.step(evidence=0.25),
             s.step(evidence=0.5)]  # past full coverage: a caller's slip is capped at the weight
    assert steps == pytest.approx([w * 0.25, 0.0, w * 0.5, w * 0.25, 0.0])  # invalid_action was not asked for
    total = 0.12  # a run whose other terms pulled the reward below what coverage alone paid
    assert sum(steps) + s.final(total) == pytest.approx(total)
    assert Shaping.from_weights(["invalid_action"]).step(evidence=1.0) == 0.0


def test_the_gains_are_the_records_coverage_step_by_step_and_sum_to_it() -> None:
    calls = [kubectl(1, "get pods -n hotel"),                      # no evidence entry names a pod list
             kubectl(2, "logs deploy/geo -n hotel"),               # logs:geo
             kubectl(3, "logs deploy/geo -n hotel --previous"),    # logs:geo again: nothing new
             kubectl(4, "get deployment geo -o yaml -n hotel", error="forbidden"),  # failed: gathers nothing
             ToolCall(t=5, tool="bogus", arguments={}, invalid=True),
             kubectl(6, "get deployment geo -o yaml -n hotel"),    # config:deployment/geo
             ToolCall(t=7, tool="get_traces", arguments={"service": "frontend"})]  # traces:frontend
    got = gains(calls)
    assert got == pytest.approx([0, 0.25, 0, 0, 0, 0.25, 0.25])
    assert sum(got) == pytest.approx(evidence_coverage(Trajectory(tool_calls=calls), GT))  # the record's figure
    none_listed = GroundTruth(root_cause="x" * 10, component="geo", mechanism="m")
    assert gains(calls, none_listed) == [0.0] * len(calls)  # coverage is 1.0 from the start: no gain to pay


def test_a_per_step_gain_tells_a_probing_policy_which_component_is_the_root_cause() -> None:
    # The leak docs/training.md states: reading each service's logs once and watching the reward names
    # the one the ground truth's evidence lists (here the faulty geo); the record's end-of-run share would
    # only have said "1 of 4", after the episode. Hence: opt-in, for the trainer, never the policy's input.
    services = ["frontend", "search", "geo", "rate", "profile"]
    got = gains([kubectl(i, f"logs deploy/{name} -n hotel") for i, name in enumerate(services)])
    assert [name for name, g in zip(services, got) if g > 0] == ["geo"]
