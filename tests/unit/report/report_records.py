"""Hand-made run records for report tests: every field a metric reads is set explicitly."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sregym.core.record import (
    AgentInfo,
    DiagnosisGrade,
    Grades,
    MitigationGrade,
    Reward,
    RunRecord,
    Versions,
)
from sregym.core.trajectory import ModelTurn, Submission, ToolCall, Trajectory

T0 = datetime(2026, 11, 20, 3, 0, tzinfo=timezone.utc)


def make_record(
    *,
    agent: str = "noop",
    kind: str = "baseline",
    model: str | None = None,
    problem: str = "p1",
    seed: int = 0,
    noise: bool = False,
    difficulty: str = "easy",
    layer: str = "application",
    failure_mode: str = "crash",
    diagnosis: bool | None = True,
    mitigation: bool | None = True,
    submit_mitigation: bool = True,
    status: str = "completed",
    tokens: int = 0,
    calls: tuple[tuple[str, str | None, bool, bool], ...] = (),  # (tool, verb, read_only, invalid)
    malformed_turns: int = 0,
    evidence_coverage: float | None = None,
    wrong_remediations: tuple[str, ...] = (),
    reward: dict[str, float] | None = None,
    ttd_s: float | None = None,
    ttm_s: float | None = None,
    phases: dict[str, float] | None = None,
    suite: str | None = "lite",
    version: str = "0.1.0",
) -> RunRecord:
    """A run record with exactly the outcome given (``diagnosis=None`` means not judged)."""
    turns = [ModelTurn(t=1.0, prompt_tokens=tokens, completion_tokens=0)] if tokens else []
    turns += [ModelTurn(t=2.0, malformed=True) for _ in range(malformed_turns)]
    submissions = [Submission(kind="mitigation", t=ttm_s or 10.0)] if submit_mitigation else []
    trajectory = Trajectory(
        tool_calls=[ToolCall(t=float(i), tool=tool, verb=verb, read_only=ro, invalid=bad)
                    for i, (tool, verb, ro, bad) in enumerate(calls)],
        model_turns=turns,
        submissions=submissions,
        stop_reason="submitted",
    )
    grades = Grades(
        diagnosis=DiagnosisGrade(oracle="checklist_judge", judged=diagnosis is not None, passed=diagnosis),
        mitigation=None if mitigation is None else MitigationGrade(passed=mitigation),
        reward=Reward(total=sum(reward.values()), terms=reward) if reward else None,
        evidence_coverage=evidence_coverage,
        wrong_remediations=list(wrong_remediations),
    )
    started = T0 + timedelta(hours=seed)
    return RunRecord(
        run_id=f"{agent}-{problem}-{seed}-{int(noise)}",
        problem_id=problem,
        spec_hash="0" * 64,
        suite=suite,
        app="hotel",
        namespace="hotel",
        agent=AgentInfo(name=agent, kind=kind, model=model, leaderboard=kind != "oracle"),
        seed=seed,
        noise=noise,
        difficulty=difficulty,
        tags={"layer": layer, "fault_family": "x", "failure_mode": failure_mode},
        started_at=started,
        ended_at=started + timedelta(seconds=sum((phases or {}).values())),
        status=status,
        error="boom" if status == "error" else None,
        phases=phases or {},
        trajectory=trajectory,
        grades=grades,
        ttd_s=ttd_s,
        ttm_s=ttm_s,
        versions=Versions(sregym=version),
    )


def synthetic_suite(agents=("noop", "random", "react", "oracle"), problems=6, seeds=2) -> list[RunRecord]:
    """A varied record set: agents of rising skill over problems of every difficulty and layer."""
    layers = ["application", "kubernetes", "os", "network", "hardware", "load"]
    skill = {"noop": 0.0, "random": 0.25, "react": 0.6, "oracle": 1.0}
    out = []
    for a_i, agent in enumerate(agents):
        for p in range(problems):
            for seed in range(seeds):
                for noise in (False, True):
                    # deterministic pseudo-outcome: higher skill passes more (problem, seed) cells
                    h = ((p * 7 + seed * 3 + noise * 5) % 10) / 10
                    s = skill.get(agent, 0.5)
                    diag = h < s + 0.1 if agent != "noop" else False
                    mit = h < s
                    out.append(make_record(
                        agent=agent, kind="oracle" if agent == "oracle" else "llm" if agent == "react" else "baseline",
                        model="m-1" if agent == "react" else None,
                        problem=f"problem_{p}", seed=seed, noise=noise,
                        difficulty=["easy", "medium", "hard"][p % 3], layer=layers[p % len(layers)],
                        failure_mode=["crash", "latency", "errors"][p % 3],
                        diagnosis=None if (agent == "random" and p == 0) else diag, mitigation=mit,
                        status="error" if (agent == "random" and p == 5 and seed == 1 and noise) else "completed",
                        tokens=int(1000 + 4000 * s + 100 * p) if agent == "react" else 0,
                        calls=tuple(("kubectl", "get", True, False) for _ in range(3 + p))
                        + ((("kubectl", "rollout", False, False),) if mit else ())
                        + ((("kubectl", "bogus", True, True),) if agent == "random" else ()),
                        evidence_coverage=min(1.0, s + 0.1 * (p % 3)),
                        wrong_remediations=("deleted pod db-0",) if (agent == "random" and not mit) else (),
                        reward={"diagnosis": 0.5 * diag, "mitigation": 0.5 * mit},
                        ttd_s=30.0 + 10 * p + a_i, ttm_s=60.0 + 20 * p + a_i,
                        phases={"prepare": 20.0 + p, "baseline": 30.0, "inject": 5.0, "agent": 100.0 + 10 * a_i,
                                "grade": 40.0, "recover": 10.0},
                    ))
    return out


def write_records(records: list[RunRecord], directory: Path) -> Path:
    """Write records as a results directory (one JSON file per run) and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    for r in records:
        (directory / f"{r.run_id}.json").write_text(json.dumps(r.model_dump(mode="json")))
    return directory
