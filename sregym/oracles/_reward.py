"""Partial credit: one reward in [0, 1] per run, with every term kept for the record.

Weights and penalties are data (``oracles/reward.yaml`` by default, documented there and in
docs/grading.md). :func:`compute_reward` is a pure function of the trajectory and the grades.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.core.problem import Budgets, GroundTruth
from sregym.core.record import DiagnosisGrade, MitigationGrade, Reward
from sregym.core.trajectory import Trajectory
from sregym.oracles._actions import evidence_coverage, wrong_remediations
from sregym.oracles._datafile import builtin_file, load_model_file

TERMS = ("evidence", "diagnosis", "mitigation", "efficiency")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TermWeights(_Strict):
    evidence: float = Field(0.15, ge=0)
    diagnosis: float = Field(0.3, ge=0)
    mitigation: float = Field(0.45, ge=0)
    efficiency: float = Field(0.1, ge=0)


class Penalties(_Strict):
    invalid_action: float = Field(0.02, ge=0)
    invalid_action_cap: float = Field(0.2, ge=0, le=1)
    wrong_remediation: float = Field(0.1, ge=0)
    wrong_remediation_cap: float = Field(0.4, ge=0, le=1)
    premature_submission: float = Field(0.2, ge=0, le=1)


class RewardWeights(_Strict):
    """The contents of ``reward.yaml``."""

    version: Literal[1] = 1
    weights: TermWeights = Field(default_factory=TermWeights)
    mitigation_partial_factor: float = Field(0.5, ge=0, le=1)
    unmeasured: Literal["drop", "zero"] = "drop"
    penalties: Penalties = Field(default_factory=Penalties)


def load_reward_weights(path: Path | str | None = None) -> RewardWeights:
    """Read ``path`` (default: the built-in ``oracles/reward.yaml``); errors name file and field."""
    return load_model_file(Path(path) if path else builtin_file("reward.yaml"), RewardWeights, "reward weights")


def elapsed_seconds(trajectory: Trajectory) -> float:
    """When the agent's last action ended, from the start of the agent phase."""
    ends = [c.t + c.duration_s for c in trajectory.tool_calls]
    ends += [t.t for t in trajectory.model_turns] + [s.t for s in trajectory.submissions]
    return max(ends, default=0.0)


def budget_used(trajectory: Trajectory, budgets: Budgets) -> float:
    """The largest share of any budget (steps, seconds, tokens) the agent used, in [0, 1]."""
    shares = [trajectory.steps / budgets.steps, elapsed_seconds(trajectory) / budgets.seconds]
    if budgets.tokens:
        shares.append(trajectory.tokens / budgets.tokens)
    return min(1.0, max(shares))


def _mitigation_term(grade: MitigationGrade | None, partial: float) -> float | None:
    if grade is None:
        return None
    if grade.passed:
        return 1.0
    if grade.rerouted:  # the checks that passed were answered by a stand-in: they earned nothing
        return 0.0
    return partial * (sum(c.passed for c in grade.checks) / len(grade.checks)) if grade.checks else 0.0


def compute_reward(trajectory: Trajectory, ground_truth: GroundTruth, diagnosis_grade: DiagnosisGrade | None,
                   mitigation_grade: MitigationGrade | None, budgets: Budgets, weights: RewardWeights) -> Reward:
    """The run's reward and every term that went into it (see ``oracles/reward.yaml``)."""
    diag = diagnosis_grade.score if diagnosis_grade and diagnosis_grade.judged else None
    mitig = _mitigation_term(mitigation_grade, weights.mitigation_partial_factor)
    succeeded = mitigation_grade.passed if mitigation_grade else bool(diagnosis_grade and diagnosis_grade.passed)
    measured: dict[str, float | None] = {
        "evidence": evidence_coverage(trajectory, ground_truth),
        "diagnosis": diag,
        "mitigation": mitig,
        "efficiency": (1.0 - budget_used(trajectory, budgets)) if succeeded else 0.0,
    }
    w = weights.weights.model_dump()
    used = {k: (v if v is not None else 0.0) for k, v in measured.items()
            if v is not None or weights.unmeasured == "zero"}
    total_w = sum(w[k] for k in used)
    positive = sum(w[k] * v for k, v in used.items()) / total_w if total_w > 0 else 0.0

    p = weights.penalties
    wrong = wrong_remediations(trajectory, ground_truth)
    mitigation_submitted = trajectory.submission("mitigation") is not None
    penalties = {
        "penalty_invalid_actions": min(p.invalid_action_cap, p.invalid_action * trajectory.invalid_actions),
        "penalty_wrong_remediations": min(p.wrong_remediation_cap, p.wrong_remediation * len(wrong)),
        "penalty_premature_submission": p.premature_submission
        if mitigation_submitted and mitigation_grade is not None and not mitigation_grade.passed else 0.0,
    }
    total = max(0.0, min(1.0, positive - sum(penalties.values())))
    terms = {k: v for k, v in used.items()} | {"positive": positive} | penalties
    terms |= {"invalid_actions": float(trajectory.invalid_actions), "wrong_remediations": float(len(wrong)),
              "budget_used": budget_used(trajectory, budgets)}
    applied = {k: (w[k] if k in used else 0.0) for k in TERMS} | p.model_dump() | {
        "mitigation_partial_factor": weights.mitigation_partial_factor}
    return Reward(total=round(total, 6), terms={k: round(v, 6) for k, v in terms.items()}, weights=applied)
