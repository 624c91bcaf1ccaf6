"""``structured_grader``: a deterministic comparison of the submitted component, mechanism and
details fields with the ground truth. It is not an LLM judge and never claims to be one: it
grades only what the agent put in the structured fields, after normalisation."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from sregym.oracles import (DiagnosisGrade, DiagnosisOracle, GroundTruth, JudgeConfig, Submission, diagnosis_oracle,
                            same_component)


_STOPWORDS = frozenset("a an the of to in on is are was were be by for and or with its it this that from at as "
                       "due into which has have".split())


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


def mechanism_overlap(submitted: str, truth: str) -> float:
    """Fraction of the ground truth mechanism's content words that the submission uses."""
    want = words(truth)
    return len(want & words(submitted)) / len(want) if want else 0.0


def detail_found(detail: str, submitted: str) -> bool:
    """A ground-truth detail (a value, a name) appears in the submitted text, case-insensitively."""
    d = re.sub(r"\s+", " ", detail.strip().lower())
    return bool(d) and d in re.sub(r"\s+", " ", submitted.lower())


class StructuredGraderParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mechanism_overlap: float = Field(0.5, ge=0, le=1, description="share of mechanism words needed to match")
    pass_threshold: float = Field(0.7, ge=0, le=1)


@diagnosis_oracle("structured_grader")
class StructuredGrader(DiagnosisOracle):
    """Compare the fields ``component``, ``mechanism`` and ``details`` with the ground truth."""

    Params = StructuredGraderParams

    def grade(self, ground_truth: GroundTruth, submission: Submission | None, judge: JudgeConfig) -> DiagnosisGrade:
        fields = submission.fields if submission else {}
        if not any(fields.get(k, "").strip() for k in ("component", "mechanism", "details")):
            return DiagnosisGrade(oracle=self.name, judged=True, passed=False, score=0.0,
                                  dimensions={"localization": 0.0, "characterization": 0.0},
                                  errors=["no structured fields (component, mechanism, details) were submitted"])
        component = fields.get("component", "")
        mechanism = fields.get("mechanism", "")
        details = fields.get("details", "")
        overlap = mechanism_overlap(mechanism, ground_truth.mechanism)
        found = [d for d in ground_truth.details if detail_found(d, f"{details} {mechanism}")]
        rows = [
            {"id": "component", "dimension": "localization", "score": float(same_component(component,
                                                                                         ground_truth.component)),
             "submitted": component, "expected": ground_truth.component},
            {"id": "mechanism", "dimension": "characterization",
             "score": float(overlap >= self.params.mechanism_overlap), "overlap": round(overlap, 3),
             "submitted": mechanism, "expected": ground_truth.mechanism},
            {"id": "details", "dimension": "characterization",
             "score": len(found) / len(ground_truth.details) if ground_truth.details else 1.0,
             "found": found, "expected": ground_truth.details},
        ]
        localization = rows[0]["score"]
        characterization = (rows[1]["score"] + rows[2]["score"]) / 2
        score = round((localization + characterization) / 2, 6)
        passed = score >= self.params.pass_threshold and localization > 0 and characterization > 0
        return DiagnosisGrade(oracle=self.name, judged=True, passed=passed, score=score,
                              dimensions={"localization": localization, "characterization": characterization},
                              questions=rows)
