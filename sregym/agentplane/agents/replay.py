"""``replay``: makes the tool calls of a recorded run again, in order, through the run's own server.

What the Gymnasium env's policy did (or any agent's run) can be played again as an ordinary run with
the same seed: the problem, noise and timeline come from the seed, the actions from the file, so the
two records can be compared call for call. The file is a run record (``sregym run``'s JSON), a
trajectory (its ``trajectory`` field alone), or a JSON list of ``{"tool": ..., "arguments": {...}}``.
A replay reproduces a run; it is not an agent of its own, so its records stay off the leaderboard.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sregym.agentplane.agents.base import Agent, AgentResult, AgentTask, agent, connect
from sregym.core.errors import UserInputError


class ReplayedCall(BaseModel):
    model_config = ConfigDict(extra="ignore")  # a recorded ToolCall carries times, results, verdicts
    tool: str
    arguments: dict[str, Any] = {}


def load_actions(path: Path) -> list[ReplayedCall]:
    """The calls to make, from a run record, a trajectory or a list; a bad file is named with what to do."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserInputError(f"replay actions {path}: no such file (give a run record, a trajectory or a "
                             "JSON list of {tool, arguments})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserInputError(f"replay actions {path}: cannot read it: {e}") from None
    except json.JSONDecodeError as e:
        raise UserInputError(f"replay actions {path}: not JSON (line {e.lineno}: {e.msg})") from None
    if isinstance(data, dict):
        data = (data.get("trajectory") or {}).get("tool_calls") if "trajectory" in data else data.get("tool_calls")
    if not isinstance(data, list):
        raise UserInputError(f"replay actions {path}: expected a run record, a trajectory (with tool_calls) or a "
                             "JSON list of {tool, arguments}")
    calls = []
    for n, item in enumerate(data):
        try:
            calls.append(ReplayedCall.model_validate(item))
        except ValidationError as e:
            where = ".".join(str(p) for p in e.errors()[0]["loc"]) or "the call"
            raise UserInputError(f"replay actions {path}: call {n}: {where}: {e.errors()[0]['msg']} (each call "
                                 "needs a tool name and an arguments object)") from None
    # a trajectory keeps calls in the order they were made; a record written by hand may not
    if all("t" in item for item in data if isinstance(item, dict)):
        calls = [c for _, c in sorted(zip((item["t"] for item in data), calls), key=lambda p: p[0])]
    return calls


@agent("replay")
class ReplayAgent(Agent):
    """Makes the recorded calls again in order (option ``actions``: the file), within the budgets;
    stops after the mitigation is submitted, or gives up when the calls run out without it."""

    leaderboard = False

    def __init__(self, actions: str | Path) -> None:
        self.calls = load_actions(Path(actions))

    async def run(self, task: AgentTask) -> AgentResult:
        async with connect(task) as client:
            for n, call in enumerate(self.calls):
                if n >= task.budgets.steps:
                    return AgentResult(stop_reason="budget_steps")
                if task.elapsed() >= task.budgets.seconds:
                    return AgentResult(stop_reason="budget_seconds")
                await client.call_tool(call.tool, call.arguments)
                if call.tool == "submit_mitigation":
                    return AgentResult(stop_reason="submitted")
        return AgentResult(stop_reason="gave_up")
