"""What the agent did: tool calls and model turns. The agent plane writes these; nothing here
refers to problems or ground truth, so the agent side may import it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

TRAJECTORY_SCHEMA_VERSION = 1


class ToolCall(BaseModel):
    t: float = Field(..., description="seconds since the agent phase started")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = 0.0
    result_bytes: int = 0
    result_text: str | None = Field(None, description="what the tool answered, as the agent read it (clipped at "
                                                      "16000 characters; None in records made before it was kept)")
    error: str | None = None
    invalid: bool = Field(False, description="malformed or refused call (counts as an invalid action)")
    read_only: bool = True
    verb: str | None = Field(None, description="kubectl verb, when tool == 'kubectl'")


class ModelTurn(BaseModel):
    t: float = Field(..., description="seconds when the turn ended (after the calls it asked for ran)")
    reply_t: float | None = Field(None, description="seconds when the model's reply arrived, before its calls ran: "
                                  "the calls made in [reply_t, t] were asked for together (None in records made "
                                  "before it was kept)")
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    malformed: bool = False


class Submission(BaseModel):
    kind: Literal["diagnosis", "mitigation"]
    t: float
    text: str = ""
    fields: dict[str, str] = Field(default_factory=dict, description="optional component/mechanism/details")


class Trajectory(BaseModel):
    schema_version: Literal[1] = TRAJECTORY_SCHEMA_VERSION
    prompt: str | None = Field(None, description="the task prompt the agent was given, as given (None in records "
                               "made before it was kept)")
    tool_calls: list[ToolCall] = Field(default_factory=list)
    model_turns: list[ModelTurn] = Field(default_factory=list)
    submissions: list[Submission] = Field(default_factory=list)
    stop_reason: str | None = Field(None, description="submitted | budget_steps | budget_seconds | budget_tokens | error")

    @property
    def steps(self) -> int:
        return len(self.tool_calls)

    @property
    def tokens(self) -> int:
        return sum(t.prompt_tokens + t.completion_tokens for t in self.model_turns)

    @property
    def invalid_actions(self) -> int:
        return sum(c.invalid for c in self.tool_calls) + sum(t.malformed for t in self.model_turns)

    def submission(self, kind: str) -> Submission | None:
        for s in reversed(self.submissions):
            if s.kind == kind:
                return s
        return None
