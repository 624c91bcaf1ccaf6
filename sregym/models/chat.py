"""A client for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, LiteLLM, ...).

Used by the ``react`` agent and by the diagnosis judge. It speaks plain HTTP through httpx so any
server that implements ``POST {base_url}/chat/completions`` works; it retries transport failures
and overloaded servers (429/5xx) with tenacity, and turns every other failure into a typed error
that names the endpoint and what to do.

Tool calls come back parsed, but a tool call whose ``arguments`` is not a JSON object is *not* an
exception: it is returned with ``parse_error`` set, because a malformed call is an agent's invalid
action to be counted and answered, not a crash.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from pydantic import BaseModel, Field
from tenacity import (AsyncRetrying, Retrying, retry_if_exception, stop_after_attempt,
                      wait_exponential)

from sregym.core.errors import PrerequisiteError, SregymError, UserInputError

DEFAULT_API_KEY_ENV = "SREGYM_API_KEY"
# Statuses that mean "try again later" rather than "your request is wrong".
RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class LLMError(SregymError):
    """Base of every failure talking to a chat-completions endpoint."""


class LLMConfigError(LLMError, UserInputError):
    """The endpoint, model or key given by the user is wrong (bad URL, 401/403/404)."""


class LLMUnavailableError(LLMError, PrerequisiteError):
    """The endpoint could not be reached, or kept failing, after every retry."""


class LLMResponseError(LLMError):
    """The endpoint answered with something that is not a chat completion (or a 4xx we cannot fix)."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status


class ToolCallRequest(BaseModel):
    """One tool call the model asked for. ``arguments`` is None when ``parse_error`` is set."""

    id: str
    name: str
    arguments_raw: str = Field("", description="the arguments exactly as the model wrote them")
    arguments: dict[str, Any] | None = None
    parse_error: str | None = Field(None, description="why arguments_raw is not a JSON object")


class ChatResult(BaseModel):
    """One assistant turn: its text, its tool calls and what it cost."""

    content: str | None = None
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    message: dict[str, Any] = Field(
        default_factory=dict, description="the assistant message as received, to append to the conversation")

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def parse_tool_call(raw: dict[str, Any], index: int) -> ToolCallRequest:
    """Parse one ``message.tool_calls[i]`` entry; malformed arguments are reported, not raised."""
    function = raw.get("function") or {}
    name = function.get("name") if isinstance(function, dict) else None
    args_raw = function.get("arguments", "") if isinstance(function, dict) else ""
    call_id = str(raw.get("id") or f"call_{index}")
    if not isinstance(name, str) or not name:
        return ToolCallRequest(id=call_id, name="", arguments_raw=str(args_raw), parse_error="the tool call has no name")
    if isinstance(args_raw, dict):  # some servers send an object instead of a JSON string
        return ToolCallRequest(id=call_id, name=name, arguments_raw=json.dumps(args_raw), arguments=args_raw)
    text = args_raw if isinstance(args_raw, str) else str(args_raw)
    if not text.strip():
        return ToolCallRequest(id=call_id, name=name, arguments_raw=text, arguments={})
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        return ToolCallRequest(id=call_id, name=name, arguments_raw=text, parse_error=f"arguments are not valid JSON: {e}")
    if not isinstance(parsed, dict):
        return ToolCallRequest(id=call_id, name=name, arguments_raw=text,
                               parse_error=f"arguments must be a JSON object, got {type(parsed).__name__}")
    return ToolCallRequest(id=call_id, name=name, arguments_raw=text, arguments=parsed)


def parse_completion(body: Any, endpoint: str) -> ChatResult:
    """Turn a chat-completions response body into a :class:`ChatResult`."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise LLMResponseError(f"{endpoint} answered without choices[0].message: {str(body)[:300]}",
                               hint="is this an OpenAI-compatible chat-completions endpoint?") from None
    raw_calls = message.get("tool_calls") or []
    usage = body.get("usage") or {}
    return ChatResult(
        content=message.get("content"),
        tool_calls=[parse_tool_call(c, i) for i, c in enumerate(raw_calls) if isinstance(c, dict)],
        finish_reason=choice.get("finish_reason"),
        model=body.get("model"),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        message={k: v for k, v in message.items() if v is not None},
    )


class _Retryable(Exception):
    """Internal: a response worth retrying (429/5xx)."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _is_retryable(e: BaseException) -> bool:
    return isinstance(e, (httpx.TransportError, _Retryable))


class ChatClient:
    """``ChatClient(base_url, model).chat(messages, tools=...)``, sync or ``await achat(...)``.

    The key is taken from ``api_key`` or else from the environment variable ``api_key_env``; with
    neither, no Authorization header is sent (local servers need none).
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
                 api_key_env: str = DEFAULT_API_KEY_ENV, timeout: float = 120.0, max_attempts: int = 4,
                 max_backoff: float = 20.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LLMConfigError(f"LLM base URL {base_url!r} is not an http(s) URL",
                                 hint="pass e.g. --base-url https://api.openai.com/v1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self._api_key = api_key if api_key is not None else os.environ.get(api_key_env)
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.max_backoff = max_backoff

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def payload(self, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                tool_choice: str | dict[str, Any] | None = None, temperature: float | None = None,
                max_tokens: int | None = None, seed: int | None = None, **extra: Any) -> dict[str, Any]:
        """The request body; options left as None are omitted (servers differ in what they accept)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = tools
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
        for key, value in (("temperature", temperature), ("max_tokens", max_tokens), ("seed", seed)):
            if value is not None:
                body[key] = value
        body.update(extra)
        return body

    def _retry_kwargs(self) -> dict[str, Any]:
        return dict(stop=stop_after_attempt(self.max_attempts),
                    wait=wait_exponential(multiplier=0.5, max=self.max_backoff),
                    retry=retry_if_exception(_is_retryable), reraise=True)

    def _check(self, response: httpx.Response) -> ChatResult:
        status = response.status_code
        if status in RETRYABLE_STATUSES:
            raise _Retryable(response)
        if status in (401, 403):
            raise LLMConfigError(f"{self.endpoint} refused the credentials (HTTP {status}): {_snippet(response)}",
                                 hint=f"set the API key in ${self.api_key_env} (or choose --api-key-env)")
        if status == 404:
            raise LLMConfigError(f"{self.endpoint} or model {self.model!r} not found (HTTP 404): {_snippet(response)}",
                                 hint="check --base-url (usually ends in /v1) and --model")
        if status >= 400:
            raise LLMResponseError(f"{self.endpoint} rejected the request (HTTP {status}): {_snippet(response)}",
                                   status=status)
        try:
            body = response.json()
        except ValueError:
            raise LLMResponseError(f"{self.endpoint} answered with a body that is not JSON: {_snippet(response)}",
                                   status=status) from None
        return parse_completion(body, self.endpoint)

    def _give_up(self, e: Exception) -> LLMError:
        if isinstance(e, _Retryable):
            return LLMUnavailableError(
                f"{self.endpoint} kept failing (HTTP {e.response.status_code}) after {self.max_attempts} attempts: "
                f"{_snippet(e.response)}", hint="the server is overloaded or down; try again later")
        return LLMUnavailableError(f"cannot reach {self.endpoint} after {self.max_attempts} attempts: {e}",
                                   hint="check --base-url and that the server is running")

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> ChatResult:
        """One chat completion (blocking). Options as in :meth:`payload`."""
        body = self.payload(messages, **options)
        try:
            with httpx.Client(timeout=self.timeout) as http:
                for attempt in Retrying(**self._retry_kwargs()):
                    with attempt:
                        return self._check(http.post(self.endpoint, json=body, headers=self._headers()))
        except (httpx.TransportError, _Retryable) as e:
            raise self._give_up(e) from None
        raise AssertionError("unreachable: tenacity either returns or re-raises")

    async def achat(self, messages: list[dict[str, Any]], **options: Any) -> ChatResult:
        """One chat completion (async). Options as in :meth:`payload`."""
        body = self.payload(messages, **options)
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as http:
                async for attempt in AsyncRetrying(**self._retry_kwargs()):
                    with attempt:
                        return self._check(await http.post(self.endpoint, json=body, headers=self._headers()))
        except (httpx.TransportError, _Retryable) as e:
            raise self._give_up(e) from None
        raise AssertionError("unreachable: tenacity either returns or re-raises")


def _snippet(response: httpx.Response, limit: int = 300) -> str:
    text = response.text.strip()
    return text if len(text) <= limit else text[:limit] + "..."


def function_tool(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool definition in the chat-completions ``tools`` format."""
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
