"""``checklist_judge``: an LLM judge answers the nine-question checklist about a diagnosis."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sregym.oracles import (DiagnosisGrade, DiagnosisOracle, GroundTruth, JudgeConfig, Submission, diagnosis_oracle,
                            load_checklist, run_checklist_judge)


class ChecklistJudgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checklist: str | None = Field(None, description="path of a checklist YAML; default oracles/checklist.yaml")
    pass_threshold: float | None = Field(None, ge=0, le=1, description="overrides the checklist's threshold")


@diagnosis_oracle("checklist_judge")
class ChecklistJudge(DiagnosisOracle):
    """Ask the configured judge model the checklist; score per question and dimension."""

    Params = ChecklistJudgeParams

    def grade(self, ground_truth: GroundTruth, submission: Submission | None, judge: JudgeConfig) -> DiagnosisGrade:
        checklist = load_checklist(self.params.checklist)
        if self.params.pass_threshold is not None:
            checklist = checklist.model_copy(update={"pass_threshold": self.params.pass_threshold})
        return run_checklist_judge(checklist, ground_truth, submission, judge, oracle=self.name)
