"""The server-side step and time meter."""

from __future__ import annotations

from sregym.agentplane.budgets import AgentBudgets, BudgetMeter


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_steps_are_refused_after_the_budget_but_submissions_never() -> None:
    meter = BudgetMeter(AgentBudgets(steps=2, seconds=60), clock=FakeClock())
    assert meter.take("kubectl") is None
    assert meter.take("query_logs") is None
    refusal = meter.take("kubectl")
    assert refusal is not None and "step budget of 2" in refusal
    assert meter.take("submit_diagnosis") is None and meter.take("submit_mitigation") is None
    assert meter.used == 2


def test_time_budget_refuses_calls_once_spent() -> None:
    clock = FakeClock()
    meter = BudgetMeter(AgentBudgets(steps=10, seconds=30), clock=clock)
    assert meter.take("kubectl") is None
    clock.now += 30
    refusal = meter.take("kubectl")
    assert refusal is not None and "time budget of 30s" in refusal
    assert meter.take("submit_mitigation") is None
    assert meter.used == 1
