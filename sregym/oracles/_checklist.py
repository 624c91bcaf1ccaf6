"""The diagnosis checklist: questions by dimension, weights, pass rule, and how answers score.

The checklist is data (``oracles/checklist.yaml`` by default); this module validates it and turns
the judge's yes/no answers into per-question, per-dimension and overall scores. Pure logic: no
model is called here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sregym.oracles._datafile import builtin_file, load_model_file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Question(_Strict):
    id: str = Field(..., pattern=r"^[a-z][a-z0-9_]*$")
    text: str = Field(..., min_length=10)


class Dimension(_Strict):
    title: str
    weight: float = Field(1.0, ge=0)
    questions: list[Question] = Field(..., min_length=1)


class Checklist(_Strict):
    """A validated checklist. Question ids are unique across all dimensions."""

    version: Literal[1] = 1
    pass_threshold: float = Field(0.7, ge=0, le=1)
    fail_on_zero_dimension: bool = True
    dimensions: dict[str, Dimension] = Field(..., min_length=1)

    @model_validator(mode="after")
    def _unique_ids_and_weights(self) -> Checklist:
        ids = [q.id for d in self.dimensions.values() for q in d.questions]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"question ids must be unique; repeated: {', '.join(dupes)}")
        if sum(d.weight for d in self.dimensions.values()) <= 0:
            raise ValueError("at least one dimension needs a positive weight")
        return self

    def questions(self) -> list[tuple[str, Question]]:
        """(dimension, question) pairs in file order."""
        return [(name, q) for name, d in self.dimensions.items() for q in d.questions]

    def question_ids(self) -> list[str]:
        return [q.id for _, q in self.questions()]


class Answer(_Strict):
    """One judge answer, as the judge must return it."""

    id: str
    answer: Literal["yes", "no"]
    evidence: str = Field(..., description="a short quote or paraphrase from the diagnosis backing the answer")
    confidence: float = Field(..., ge=0, le=1)

    @field_validator("answer", mode="before")
    @classmethod
    def _normalise(cls, v: object) -> object:
        return v.strip().lower() if isinstance(v, str) else v


class Score(BaseModel):
    """The outcome of scoring one set of answers against a checklist."""

    score: float
    passed: bool
    dimensions: dict[str, float]
    questions: list[dict]


def load_checklist(path: Path | str | None = None) -> Checklist:
    """Read and validate a checklist file (default: the built-in ``oracles/checklist.yaml``)."""
    return load_model_file(Path(path) if path else builtin_file("checklist.yaml"), Checklist, "checklist")


def score_answers(checklist: Checklist, answers: list[Answer]) -> Score:
    """Dimension score = fraction of "yes"; overall = weighted mean of dimensions.

    Passes when overall >= ``pass_threshold`` and, if ``fail_on_zero_dimension``, every weighted
    dimension scored above zero. ``answers`` must cover every question exactly once.
    """
    by_id = {a.id: a for a in answers}
    missing = [q for q in checklist.question_ids() if q not in by_id]
    if missing or len(by_id) != len(answers):
        raise ValueError(f"answers must cover every question once; missing: {missing}")
    dimensions: dict[str, float] = {}
    rows: list[dict] = []
    for name, dim in checklist.dimensions.items():
        yes = 0
        for q in dim.questions:
            a = by_id[q.id]
            yes += a.answer == "yes"
            rows.append({"id": q.id, "dimension": name, "answer": a.answer, "score": float(a.answer == "yes"),
                         "evidence": a.evidence, "confidence": a.confidence})
        dimensions[name] = yes / len(dim.questions)
    total_weight = sum(d.weight for d in checklist.dimensions.values())
    overall = sum(dimensions[n] * d.weight for n, d in checklist.dimensions.items()) / total_weight
    zero = any(dimensions[n] == 0 and d.weight > 0 for n, d in checklist.dimensions.items())
    passed = overall >= checklist.pass_threshold - 1e-9 and not (checklist.fail_on_zero_dimension and zero)
    return Score(score=round(overall, 6), passed=passed, dimensions=dimensions, questions=rows)
