"""The env's spaces and action parsing: every action is parsed, none raises, and what the env
returns is inside its declared spaces."""

from __future__ import annotations

import json

import pytest
from gymnasium.utils.env_checker import check_action_space, check_observation_space

from sregym.gym.spaces import (MAX_TEXT, action_space, as_space_text, observation, observation_space, parse_action,
                               refusal_text)


def test_spaces_are_valid_gymnasium_spaces_and_sample_round_trip() -> None:
    check_action_space(action_space())
    check_observation_space(observation_space())
    space = action_space()
    space.seed(3)
    sample = space.sample()
    assert sample in space and set(sample) == {"tool", "arguments"}


def test_a_well_formed_call_is_parsed_into_name_and_arguments() -> None:
    a = parse_action({"tool": "kubectl", "arguments": json.dumps({"command": "get pods -n tiny"}), "tokens": 120})
    assert (a.tool, a.arguments, a.error, a.tokens) == ("kubectl", {"command": "get pods -n tiny"}, None, 120)
    assert parse_action({"tool": "submit_mitigation", "arguments": ""}).arguments == {}
    assert parse_action({"tool": "kubectl", "arguments": {"command": ["get", "pods"]}}).arguments == {
        "command": ["get", "pods"]}


@pytest.mark.parametrize("action, says", [
    ({"tool": "kubectl", "arguments": '{"command": ["get", "pods"'}, "not JSON"),
    ({"tool": "kubectl", "arguments": '["get", "pods"]'}, "JSON object, not list"),
    ({"tool": "kubectl", "arguments": 7}, "JSON object in a string"),
    ({"tool": "", "arguments": "{}"}, "names no tool"),
    ({"arguments": "{}"}, "names no tool"),
    ("kubectl get pods", "is a dict"),
    (None, "is a dict"),
])
def test_a_malformed_action_is_an_error_the_policy_reads_never_an_exception(action, says) -> None:
    parsed = parse_action(action)
    assert parsed.error is not None and says in parsed.error
    assert refusal_text(parsed).startswith("error: your call to")


def test_bad_token_counts_are_ignored_not_trusted() -> None:
    assert parse_action({"tool": "kubectl", "arguments": "", "tokens": -5}).tokens == 0
    assert parse_action({"tool": "kubectl", "arguments": "", "tokens": True}).tokens == 0
    assert parse_action({"tool": "kubectl", "arguments": "", "tokens": "9"}).tokens == 0


def test_observations_stay_inside_the_space_whatever_the_tool_printed() -> None:
    space = observation_space()
    obs = observation("pods \u2026 ok\n\u00e9t\u00e9 \U0001F600", tool="kubectl", error=True,
                      structured={"verb": "get", "exit_code": 1, "output": "caf\u00e9"})
    assert obs in space
    assert "\\u2026" in obs["text"] and json.loads(obs["structured"])["verb"] == "get"
    long = observation("x" * (MAX_TEXT * 2))
    assert long in space and len(long["text"]) == MAX_TEXT and long["text"].endswith("characters]")
    assert as_space_text("plain text") == "plain text"
    assert observation("", tool="not a tool name!") in space
