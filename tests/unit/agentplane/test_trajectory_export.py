"""The sregym-trajectory v1 export."""

from __future__ import annotations

import json

from sregym.agentplane.export import EXPORT_FORMAT, export_record, export_trajectory
from sregym.core.record import AgentInfo, RunRecord, Versions
from sregym.core.trajectory import ModelTurn, Submission, ToolCall, Trajectory

TRAJECTORY = Trajectory(
    tool_calls=[
        ToolCall(t=2.0, tool="kubectl", arguments={"command": "get pods"}, duration_s=0.5, result_bytes=100, verb="get"),
        ToolCall(t=5.0, tool="kubectl", arguments={"command": "rollout restart deploy/geo"}, duration_s=0.25,
                 read_only=False, verb="rollout"),
        ToolCall(t=6.0, tool="nope", error="Unknown tool: nope", invalid=True),
        ToolCall(t=9.0, tool="submit_diagnosis", arguments={"text": "geo"}, read_only=False),
    ],
    model_turns=[ModelTurn(t=2.0, prompt_tokens=100, completion_tokens=10, tool_calls=1),
                 ModelTurn(t=4.0, prompt_tokens=200, completion_tokens=20, tool_calls=1, malformed=True)],
    submissions=[Submission(kind="diagnosis", t=9.0, text="geo")],
    stop_reason="budget_steps",
)


def test_summary_counts_what_researchers_compare() -> None:
    doc = export_trajectory(TRAJECTORY, run_id="r1", model=None)
    s = doc["summary"]
    assert doc["format"] == EXPORT_FORMAT and doc["version"] == 1 and doc["meta"] == {"run_id": "r1"}
    assert (s["steps"], s["invalid_actions"], s["read_only_calls"], s["write_calls"], s["tool_errors"]) == (4, 2, 2, 2, 1)
    assert s["tool_seconds"] == 0.75 and s["prompt_tokens"] == 300 and s["completion_tokens"] == 30
    assert s["kubectl_verbs"] == ["get", "rollout"] and s["diagnosis_at"] == 9.0 and s["mitigation_at"] is None
    assert s["stop_reason"] == "budget_steps"


def test_events_are_one_timeline_with_model_turns_first_on_ties() -> None:
    events = export_trajectory(TRAJECTORY)["events"]
    assert [(e["type"], e["t"]) for e in events] == [
        ("model_turn", 2.0), ("tool_call", 2.0), ("model_turn", 4.0), ("tool_call", 5.0), ("tool_call", 6.0),
        ("tool_call", 9.0), ("submission", 9.0)]
    json.dumps(events)  # plain JSON


def test_export_of_a_run_record_carries_its_identity() -> None:
    record = RunRecord(run_id="r2", problem_id="p", spec_hash="h", app="hotel", namespace="hotel",
                       agent=AgentInfo(name="react", kind="llm", model="m"), seed=3, noise=True, difficulty="easy",
                       trajectory=TRAJECTORY, versions=Versions(sregym="0"))
    doc = export_record(record)
    assert doc["meta"] == {"run_id": "r2", "problem_id": "p", "agent": "react", "model": "m", "seed": 3, "noise": True}
    assert len(doc["events"]) == 7
