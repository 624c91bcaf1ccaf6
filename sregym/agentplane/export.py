"""Export a trajectory to the documented JSON format ``sregym-trajectory`` v1 (docs/trajectory-format.md).

One chronological list of events (tool calls, model turns, submissions) plus a summary, so
trajectories from any agent can be compared, replayed for analysis, or used as training data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sregym.core.record import RunRecord
from sregym.core.trajectory import Trajectory

EXPORT_FORMAT = "sregym-trajectory"
EXPORT_VERSION = 1


def summarize(trajectory: Trajectory) -> dict[str, Any]:
    """Counts a researcher compares across agents."""
    calls = trajectory.tool_calls
    diagnosis, mitigation = trajectory.submission("diagnosis"), trajectory.submission("mitigation")
    return {
        "steps": trajectory.steps,
        "invalid_actions": trajectory.invalid_actions,
        "read_only_calls": sum(c.read_only for c in calls),
        "write_calls": sum(not c.read_only for c in calls),
        "tool_errors": sum(c.error is not None for c in calls),
        "tool_seconds": round(sum(c.duration_s for c in calls), 3),
        "model_turns": len(trajectory.model_turns),
        "prompt_tokens": sum(t.prompt_tokens for t in trajectory.model_turns),
        "completion_tokens": sum(t.completion_tokens for t in trajectory.model_turns),
        "tools_used": sorted({c.tool for c in calls}),
        "kubectl_verbs": sorted({c.verb for c in calls if c.verb}),
        "diagnosis_at": diagnosis.t if diagnosis else None,
        "mitigation_at": mitigation.t if mitigation else None,
        "stop_reason": trajectory.stop_reason,
    }


def events(trajectory: Trajectory) -> list[dict[str, Any]]:
    """Tool calls, model turns and submissions in time order, each tagged with its ``type``."""
    rows: list[tuple[float, int, dict[str, Any]]] = []
    for order, (kind, items) in enumerate((("model_turn", trajectory.model_turns), ("tool_call", trajectory.tool_calls),
                                           ("submission", trajectory.submissions))):
        for item in items:
            rows.append((item.t, order, {"type": kind, **item.model_dump(mode="json")}))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r[2] for r in rows]


def export_trajectory(trajectory: Trajectory, **meta: Any) -> dict[str, Any]:
    """The export document; ``meta`` (run_id, agent, model, problem_id, seed, ...) is kept as given."""
    return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "meta": {k: v for k, v in meta.items() if v is not None},
            "summary": summarize(trajectory), "events": events(trajectory)}


def export_record(record: RunRecord) -> dict[str, Any]:
    """The export of one run record's trajectory, with the run's identity as ``meta``."""
    return export_trajectory(record.trajectory, run_id=record.run_id, problem_id=record.problem_id,
                             agent=record.agent.name, model=record.agent.model, seed=record.seed,
                             noise=record.noise)


def write_export(document: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path
