"""The run record: one JSON file per run, everything a researcher compares."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, Field

from sregym.core.settings import RunSettings
from sregym.core.trajectory import Trajectory

RECORD_SCHEMA_VERSION = 1


class TimelineEvent(BaseModel):
    """One resolved start or stop of a fault or noise event, relative to the injection phase."""

    at: float
    action: Literal["start", "stop"]
    kind: Literal["fault", "noise"]
    name: str = Field(..., description="fault id or noise type")
    injector: str
    target: str = ""
    params: dict[str, Any] = Field(default_factory=dict, description="a noise event's own params (over the run's)")
    mechanism: str | None = None
    done_at: float | None = Field(None, description="when it actually happened (None: never reached)")
    ok: bool | None = None
    error: str | None = None


class CheckResult(BaseModel):
    name: str
    passed: bool
    evidence: dict[str, Any] = Field(default_factory=dict)
    message: str = ""


class DiagnosisGrade(BaseModel):
    oracle: str
    judged: bool = Field(..., description="False when no judge was configured: the diagnosis was not graded")
    passed: bool | None = None
    score: float | None = None
    dimensions: dict[str, float] = Field(default_factory=dict)
    questions: list[dict[str, Any]] = Field(default_factory=list)
    judge_model: str | None = None
    errors: list[str] = Field(default_factory=list)
    diagnosis_truncated: bool = Field(False, description="the diagnosis passed the judge's length cap: it read the start")


class MitigationGrade(BaseModel):
    passed: bool
    checks: list[CheckResult] = Field(default_factory=list)
    # how the app's requests reached something else than at the baseline when it was graded (a
    # stand-in behind a Service or a caller's address): any entry fails the mitigation, no partial credit
    rerouted: list[str] = Field(default_factory=list)


class Reward(BaseModel):
    total: float
    terms: dict[str, float] = Field(default_factory=dict)
    weights: dict[str, float] = Field(default_factory=dict)


class Grades(BaseModel):
    diagnosis: DiagnosisGrade | None = None
    mitigation: MitigationGrade | None = None
    reward: Reward | None = None
    evidence_coverage: float | None = None
    wrong_remediations: list[str] = Field(default_factory=list)


class AgentObject(BaseModel):
    """An object of the app namespace that the agent made or changed outside the app's release
    during the agent phase, and what teardown did with it."""

    resource: str = Field(..., description="kubectl resource, e.g. deployments.apps")
    namespace: str
    name: str
    change: Literal["created", "changed", "drifted"] = Field(
        ..., description="created: new and not the release's (removed at teardown); changed: existed before, "
                         "not the release's (recorded only); drifted: a release object that differs from its chart "
                         "(put back by the next deploy)")
    removed: bool = False
    error: str | None = None


class AgentInfo(BaseModel):
    name: str
    kind: Literal["baseline", "oracle", "llm", "external"] = "baseline"
    model: str | None = None
    leaderboard: bool = Field(True, description="False for the oracle agent: an upper bound, never ranked")


class Versions(BaseModel):
    sregym: str
    kubernetes: str | None = None
    provider: str | None = None
    helm: str | None = None
    python: str | None = None


class RunRecord(BaseModel):
    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    run_id: str
    problem_id: str
    spec_hash: str
    suite: str | None = None
    app: str
    namespace: str
    agent: AgentInfo
    seed: int
    noise: bool
    settings: RunSettings | None = Field(None, description="what the run was played with (agent options, budgets, "
                                                           "windows, timeouts, plug-ins)")
    difficulty: str
    tags: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    ended_at: datetime | None = None
    status: Literal["completed", "error", "aborted"] = "completed"
    error: str | None = None
    phases: dict[str, float] = Field(default_factory=dict, description="seconds spent per phase")
    phase_starts: dict[str, float] = Field(default_factory=dict, description="seconds from the run's start to each "
                                           "phase's (first) start: the agent plane's sandbox opens alongside the "
                                           "baseline and injection")
    timeline: list[TimelineEvent] = Field(default_factory=list)
    mechanisms: dict[str, str] = Field(default_factory=dict, description="fault id -> mechanism that ran")
    reapplied: list[dict[str, Any]] = Field(
        default_factory=list, description="pod-scoped faults re-applied to a new pod of their target: journal "
                                          "key (fault#n), fault, the copy it replaces, pod uids, unix time")
    baseline: dict[str, Any] = Field(default_factory=dict, description="SLO measurements before injection")
    trajectory: Trajectory = Field(default_factory=Trajectory)
    agent_objects: list[AgentObject] = Field(default_factory=list,
                                             description="what the agent made or changed outside the release")
    grades: Grades = Field(default_factory=Grades)
    ttd_s: float | None = Field(None, description="time to diagnose: agent start to diagnosis submission")
    ttm_s: float | None = Field(None, description="time to mitigate: agent start to mitigation submission")
    versions: Versions

    @property
    def diagnosis_passed(self) -> bool | None:
        d = self.grades.diagnosis
        return d.passed if d and d.judged else None

    @property
    def mitigation_passed(self) -> bool | None:
        return self.grades.mitigation.passed if self.grades.mitigation else None
