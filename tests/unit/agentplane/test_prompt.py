"""The agent's prompt: the alert, the namespace, the tools, and nothing about the fault."""

from __future__ import annotations

import pytest

from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.prompt import PromptLeakError, check_prompt, render_prompt

FORBIDDEN = ["fault", "inject", "injector", "chaos", "ground truth", "env_var", "latent_sector_error",
             "hotel_geo_wrong_port", "node-ops", "oracle"]


def test_prompt_states_alert_namespace_tools_and_budget() -> None:
    text = render_prompt("p99 latency of /search above 2s", "hotel", AgentBudgets(steps=12, seconds=600, tokens=9000))
    assert "p99 latency of /search above 2s" in text
    assert "`hotel`" in text
    for tool in ("kubectl", "query_metrics", "query_logs", "query_traces", "submit_diagnosis", "submit_mitigation"):
        assert tool in text
    assert "12 tool calls" in text and "10.0 minutes" in text and "9000 model tokens" in text


def test_prompt_never_contains_fault_plane_words() -> None:
    for user_report in (False, True):
        for metrics, traces in ((True, True), (False, False)):
            text = render_prompt("Users cannot book rooms", "hotel", AgentBudgets(), metrics=metrics, traces=traces,
                                 user_report=user_report, mcp_url="http://127.0.0.1:1/mcp")
            assert check_prompt(text, FORBIDDEN) == text


def test_tools_not_available_are_not_offered() -> None:
    text = render_prompt("errors", "shop", AgentBudgets(), metrics=False, traces=False)
    assert "query_metrics" not in text and "query_traces" not in text and "query_logs" in text


def test_check_prompt_names_the_leaked_word() -> None:
    with pytest.raises(PromptLeakError, match="hotel_geo_wrong_port"):
        check_prompt(render_prompt("hotel_geo_wrong_port fired", "hotel", AgentBudgets()), FORBIDDEN)
