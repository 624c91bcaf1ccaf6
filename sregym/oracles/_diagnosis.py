"""Diagnosis oracles: grade the agent's diagnosis against the ground truth.

Registered like mitigation oracles (``@diagnosis_oracle("checklist_judge")`` in ``oracles/``)
and referenced from a problem as ``oracles.diagnosis: {name: ..., params: {...}}``. The
conductor calls :func:`grade_diagnosis`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from sregym.core.params import NoParams, validate_params
from sregym.core.problem import GroundTruth, OracleRef
from sregym.core.record import DiagnosisGrade
from sregym.core.registry import Registry
from sregym.core.trajectory import Submission
from sregym.oracles._judge import JudgeConfig


class DiagnosisOracle(abc.ABC):
    """Base of a diagnosis oracle. ``grade`` must not touch the cluster: it judges text."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel):
        self.params = params

    @classmethod
    def parse_params(cls, raw: dict[str, Any], *, where: str = "oracles.diagnosis.params") -> BaseModel:
        return validate_params(cls.Params, raw, where=where, owner=f"diagnosis oracle {cls.name!r}")

    @abc.abstractmethod
    def grade(self, ground_truth: GroundTruth, submission: Submission | None, judge: JudgeConfig) -> DiagnosisGrade:
        """Grade one diagnosis (``None`` when the agent submitted none)."""


DIAGNOSIS_ORACLES: Registry[type[DiagnosisOracle]] = Registry("diagnosis oracle", "sregym.oracles", "oracles")


D = TypeVar("D", bound=type)


def diagnosis_oracle(name: str) -> Callable[[D], D]:
    """Class decorator registering a diagnosis oracle under ``name`` (``@diagnosis_oracle("checklist_judge")``)."""
    return DIAGNOSIS_ORACLES.plugin(name)


def grade_diagnosis(oracle_ref: OracleRef, ground_truth: GroundTruth, submission: Submission | None,
                    judge_config: JudgeConfig | None = None) -> DiagnosisGrade:
    """Build the referenced diagnosis oracle and grade ``submission`` with it.

    ``judge_config`` defaults to :meth:`JudgeConfig.from_env`. Unknown oracle names and bad
    params raise ``UserInputError``.
    """
    cls = DIAGNOSIS_ORACLES.get(oracle_ref.name)
    params = cls.parse_params(oracle_ref.params)
    return cls(params).grade(ground_truth, submission, judge_config or JudgeConfig.from_env())
