"""The chat-completions client against the real local playback HTTP server."""

from __future__ import annotations

import anyio
import pytest

from sregym.core.errors import PrerequisiteError, UserInputError
from sregym.models import ChatClient, LLMConfigError, LLMResponseError, LLMUnavailableError, function_tool
from sregym.testing.llm_playback import PlaybackServer, Reply, ScriptedToolCall, raw_tool_call, text, tool_call

KUBECTL_TOOL = function_tool("kubectl", "run kubectl", {"type": "object", "properties": {"args": {"type": "array"}}})


def test_chat_returns_tool_calls_and_usage_and_sends_the_tools() -> None:
    with PlaybackServer([tool_call("kubectl", {"args": ["get", "pods"]}, prompt_tokens=123, completion_tokens=7)]) as srv:
        result = ChatClient(srv.base_url, "m1", api_key="k-1").chat(
            [{"role": "user", "content": "checkout is slow"}], tools=[KUBECTL_TOOL], tool_choice="auto", seed=3)
        sent = srv.chat_requests[0]
    assert [c.name for c in result.tool_calls] == ["kubectl"]
    assert result.tool_calls[0].arguments == {"args": ["get", "pods"]}
    assert result.tool_calls[0].parse_error is None
    assert (result.prompt_tokens, result.completion_tokens, result.total_tokens) == (123, 7, 130)
    assert result.finish_reason == "tool_calls"
    assert result.message["tool_calls"][0]["function"]["name"] == "kubectl"
    assert sent.json["model"] == "m1"
    assert sent.json["messages"][0]["content"] == "checkout is slow"
    assert sent.json["tools"][0]["function"]["name"] == "kubectl"
    assert sent.json["tool_choice"] == "auto" and sent.json["seed"] == 3
    assert sent.headers["Authorization"] == "Bearer k-1"


def test_api_key_comes_from_the_named_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "from-env")
    with PlaybackServer([text("hi")]) as srv:
        ChatClient(srv.base_url, "m", api_key_env="MY_LLM_KEY").chat([{"role": "user", "content": "x"}])
        assert srv.requests[0].headers["Authorization"] == "Bearer from-env"


def test_no_key_sends_no_authorization_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SREGYM_API_KEY", raising=False)
    with PlaybackServer([text("hi")]) as srv:
        result = ChatClient(srv.base_url, "m").chat([{"role": "user", "content": "x"}])
        assert "Authorization" not in srv.requests[0].headers
    assert result.content == "hi" and result.tool_calls == []


def test_malformed_arguments_are_reported_not_raised() -> None:
    script = [raw_tool_call("kubectl", '{"args": ["get", '), raw_tool_call("kubectl", "[1, 2]"),
              Reply(tool_calls=[ScriptedToolCall(name="no_such_tool", arguments={"a": 1})])]
    with PlaybackServer(script) as srv:
        client = ChatClient(srv.base_url, "m")
        broken, listed, unknown = (client.chat([{"role": "user", "content": "x"}]) for _ in range(3))
    assert broken.tool_calls[0].arguments is None and "not valid JSON" in broken.tool_calls[0].parse_error
    assert broken.tool_calls[0].arguments_raw == '{"args": ["get", '
    assert "JSON object" in listed.tool_calls[0].parse_error
    assert unknown.tool_calls[0].name == "no_such_tool" and unknown.tool_calls[0].arguments == {"a": 1}


def test_overloaded_server_is_retried_then_succeeds() -> None:
    with PlaybackServer([Reply(status=503), Reply(status=429), text("ok")]) as srv:
        result = ChatClient(srv.base_url, "m", max_backoff=0.01).chat([{"role": "user", "content": "x"}])
        assert len(srv.chat_requests) == 3
    assert result.content == "ok"


def test_server_that_keeps_failing_gives_a_typed_unavailable_error() -> None:
    with PlaybackServer([Reply(status=502)], on_exhausted="repeat_last") as srv:
        with pytest.raises(LLMUnavailableError) as err:
            ChatClient(srv.base_url, "m", max_attempts=2, max_backoff=0.01).chat([{"role": "user", "content": "x"}])
        assert len(srv.chat_requests) == 2
    assert isinstance(err.value, PrerequisiteError) and "502" in str(err.value)


def test_unreachable_endpoint_is_a_typed_error_naming_it() -> None:
    with PlaybackServer([]) as srv:
        url = srv.base_url  # the port is free again once the server stops
    with pytest.raises(LLMUnavailableError, match="cannot reach"):
        ChatClient(url, "m", max_attempts=2, max_backoff=0.01).chat([{"role": "user", "content": "x"}])


def test_bad_credentials_and_bad_bodies_are_typed_errors() -> None:
    with PlaybackServer([Reply(status=401), Reply(raw_body="<html>oops</html>"), Reply(raw_body='{"x": 1}'),
                         Reply(status=400)]) as srv:
        client = ChatClient(srv.base_url, "m", api_key_env="NOPE_KEY")
        with pytest.raises(LLMConfigError, match=r"\$NOPE_KEY") as auth:
            client.chat([])
        with pytest.raises(LLMResponseError, match="not JSON"):
            client.chat([])
        with pytest.raises(LLMResponseError, match="choices"):
            client.chat([])
        with pytest.raises(LLMResponseError, match="HTTP 400"):
            client.chat([])
    assert isinstance(auth.value, UserInputError)


def test_base_url_must_be_http() -> None:
    with pytest.raises(LLMConfigError, match="not an http"):
        ChatClient("localhost:8000", "m")


def test_async_chat_matches_sync() -> None:
    async def go(url: str):
        return await ChatClient(url, "m").achat([{"role": "user", "content": "x"}])

    with PlaybackServer([text("async hi", prompt_tokens=5, completion_tokens=2)]) as srv:
        result = anyio.run(go, srv.base_url)
    assert result.content == "async hi" and result.total_tokens == 7


def test_exhausted_script_is_an_error_not_a_silent_answer() -> None:
    with PlaybackServer([text("one")]) as srv:
        client = ChatClient(srv.base_url, "m")
        client.chat([])
        with pytest.raises(LLMResponseError, match="exhausted"):
            client.chat([])
