"""Shaped rewards move credit earlier and never change the return: whatever was paid on the
way, the episode's rewards sum to the run's reward, with the record's weights and caps."""

from __future__ import annotations

import pytest

from sregym.gym.shaping import Shaping, UnknownShapingTerm, shaped_terms
from sregym.oracles import load_reward_weights


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
    with pytest.raises(UnknownShapingTerm, match="invalid_action, wrong_remediation"):
        shaped_terms(["evidence_gain"])
