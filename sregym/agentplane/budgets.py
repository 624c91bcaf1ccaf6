"""The agent's budgets (steps, wall time, tokens) and the server-side step and time meter.

Defined here, not taken from ``sregym.core.problem.Budgets``: the agent plane must not import the
module that holds ground truth. The conductor copies the problem's budgets into this model.
"""

from __future__ import annotations

import threading
import time

from pydantic import BaseModel, Field

# Submissions are never refused for budget: an agent that spent its steps must still be able to
# say what it found and that it is done.
UNMETERED_TOOLS = frozenset({"submit_diagnosis", "submit_mitigation"})


class AgentBudgets(BaseModel):
    """Limits of one agent run. ``tokens`` is enforced by LLM agents (the server never sees tokens)."""

    steps: int = Field(40, gt=0, description="tool calls (submissions excluded)")
    seconds: float = Field(900, gt=0, description="wall time from the moment the agent plane opens")
    tokens: int | None = Field(None, gt=0, description="prompt + completion tokens, for LLM agents")


class BudgetMeter:
    """Counts metered tool calls and wall time; thread-safe (tools may run concurrently)."""

    def __init__(self, budgets: AgentBudgets, *, clock=time.monotonic) -> None:
        self.budgets = budgets
        self._clock = clock
        self._started = clock()
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    @property
    def elapsed(self) -> float:
        return self._clock() - self._started

    def take(self, tool: str) -> str | None:
        """Count one call of ``tool``; return why it is refused, or None when it may run."""
        if tool in UNMETERED_TOOLS:
            return None
        with self._lock:
            if self.elapsed >= self.budgets.seconds:
                return (f"the time budget of {self.budgets.seconds:g}s is spent; only submit_diagnosis and "
                        "submit_mitigation are accepted now")
            if self._used >= self.budgets.steps:
                return (f"the step budget of {self.budgets.steps} tool calls is spent; only submit_diagnosis and "
                        "submit_mitigation are accepted now")
            self._used += 1
            return None
