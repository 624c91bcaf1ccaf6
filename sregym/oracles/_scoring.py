"""The trajectory-derived scores of a run record, filled in one place so the conductor and
``sregym regrade`` compute them identically."""

from __future__ import annotations

from sregym.core.problem import Budgets, GroundTruth
from sregym.core.record import Grades
from sregym.core.trajectory import Trajectory
from sregym.oracles._actions import evidence_coverage, wrong_remediations
from sregym.oracles._reward import RewardWeights, compute_reward, load_reward_weights


def complete_grades(grades: Grades, trajectory: Trajectory, ground_truth: GroundTruth, budgets: Budgets,
                    weights: RewardWeights | None = None) -> Grades:
    """A copy of ``grades`` with ``evidence_coverage``, ``wrong_remediations`` and ``reward`` set
    from the trajectory and the diagnosis and mitigation grades already in it."""
    weights = weights or load_reward_weights()
    return grades.model_copy(update={
        "evidence_coverage": round(evidence_coverage(trajectory, ground_truth), 6),
        "wrong_remediations": wrong_remediations(trajectory, ground_truth),
        "reward": compute_reward(trajectory, ground_truth, grades.diagnosis, grades.mitigation, budgets, weights),
    })
