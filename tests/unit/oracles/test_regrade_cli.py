"""``sregym regrade`` reproduces a record's trajectory-derived scores from the record and problem."""

from __future__ import annotations

import json

import yaml

from sregym.cli.main import run_cli
from sregym.core.record import (AgentInfo, CheckResult, DiagnosisGrade, Grades, MitigationGrade, RunRecord,
                                Versions)
from sregym.core.trajectory import Submission, ToolCall, Trajectory

PROBLEM = {
    "id": "geo_bad_env", "title": "geo env", "alert": "Search requests return HTTP 500 for many users",
    "app": {"name": "hotel-reservation"},
    "faults": [{"id": "bad_env", "injector": "env_var", "target": {"kind": "Deployment", "name": "geo"}}],
    "ground_truth": {"root_cause": "geo's DATABASE_URL points at a wrong port", "component": "geo",
                     "mechanism": "misconfigured env var", "scope": ["geo", "frontend"],
                     "evidence": ["logs:geo", "config:deployment/geo"]},
    "oracles": {"mitigation": [{"name": "workload_health"}]},
    "difficulty": "easy", "tags": {"layer": "application", "fault_family": "config", "failure_mode": "errors"},
    "budgets": {"steps": 10, "seconds": 100},
}


def test_regrade_recomputes_coverage_wrong_remediations_and_reward(tmp_path, capsys):
    from sregym.core.problem import Problem

    problem_file = tmp_path / "geo_bad_env.yaml"
    problem_file.write_text(yaml.safe_dump(PROBLEM))
    traj = Trajectory(
        tool_calls=[ToolCall(t=1, tool="query_logs", arguments={"namespace": "hotel", "pod": "geo"}),
                    ToolCall(t=2, tool="kubectl", arguments={"command": "rollout restart deploy/search"},
                             verb="rollout", read_only=False)],
        submissions=[Submission(kind="mitigation", t=10.0)])
    grades = Grades(diagnosis=DiagnosisGrade(oracle="checklist_judge", judged=True, passed=True, score=1.0),
                    mitigation=MitigationGrade(passed=True, checks=[CheckResult(name="workload_health", passed=True)]))
    rec = RunRecord(run_id="r1", problem_id="geo_bad_env", spec_hash=Problem.model_validate(PROBLEM).spec_hash(),
                    app="hotel-reservation", namespace="hotel", agent=AgentInfo(name="noop"), seed=0, noise=False,
                    difficulty="easy", trajectory=traj, grades=grades, versions=Versions(sregym="0"))
    record_file = tmp_path / "r1.json"
    record_file.write_text(rec.model_dump_json())

    assert run_cli(["regrade", str(record_file), "--problem", str(problem_file), "--write"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["evidence_coverage"] == 0.5
    assert len(out["wrong_remediations"]) == 1 and "search" in out["wrong_remediations"][0]
    # positive: (0.15*0.5 + 0.3 + 0.45 + 0.1*(1-0.2)) / 1.0 = 0.905, minus 0.1 for the wrong remediation
    assert abs(out["reward"]["total"] - 0.805) < 1e-6
    assert RunRecord.model_validate_json(record_file.read_text()).grades.reward.total == out["reward"]["total"]


def test_regrade_of_a_missing_record_is_a_clear_input_error(tmp_path, capsys):
    assert run_cli(["regrade", str(tmp_path / "nope.json")]) == 2
    assert "no such run record" in capsys.readouterr().err
