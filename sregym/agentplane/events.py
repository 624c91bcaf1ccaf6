"""What the MCP server reports to the conductor: each tool call and each submission.

The server sends these as JSON over HTTP to a callback URL on 127.0.0.1 (the agent plane's
receiver), with a bearer token so nothing else on the host can forge a submission. For
bring-your-own-agent use without a conductor they go to a JSON-lines file or stderr instead.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol

import httpx
from pydantic import BaseModel, Field

CALLBACK_TOKEN_ENV = "SREGYM_CALLBACK_TOKEN"
TOKEN_HEADER = "Authorization"
MAX_ARGUMENT_CHARS = 4000
# What a tool answered is kept up to this many characters (the tools cap their own output at 16000
# by default), so a trajectory can be replayed or trained on with the text the agent read.
MAX_RESULT_CHARS = 16000


class ToolCallEvent(BaseModel):
    """One tool call as the server saw it (``at`` is unix time when it started)."""

    type: Literal["tool_call"] = "tool_call"
    at: float
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = 0.0
    result_bytes: int = 0
    result_text: str | None = None
    error: str | None = None
    invalid: bool = False
    read_only: bool = True
    verb: str | None = None


class SubmissionEvent(BaseModel):
    """A diagnosis or the statement that mitigation is done."""

    type: Literal["submission"] = "submission"
    at: float
    kind: Literal["diagnosis", "mitigation"]
    text: str = ""
    fields: dict[str, str] = Field(default_factory=dict)


Event = ToolCallEvent | SubmissionEvent


def clip_result(text: str) -> str:
    """A tool's answer as kept in the record: whole up to ``MAX_RESULT_CHARS``, else cut with a note."""
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return text[:MAX_RESULT_CHARS] + f"...[{len(text) - MAX_RESULT_CHARS} more characters]"


def clip_arguments(arguments: dict[str, Any], whole: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Arguments as recorded: long strings are cut so records stay small.

    ``whole`` names arguments kept whole up to a larger size: the ones the grader reads (kubectl's
    command and stdin), whose tool refuses anything longer, so a call that ran is recorded as it ran.
    """
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        limit = (whole or {}).get(key, MAX_ARGUMENT_CHARS)
        if isinstance(value, str) and len(value) > limit:
            value = value[:limit] + f"...[{len(value) - limit} more characters]"
        elif isinstance(value, list) and sum(len(str(v)) for v in value) > limit:
            kept, size = [], 0
            for item in value:
                size += len(str(item))
                if size > limit:
                    break
                kept.append(item)
            value = [*kept, f"...[{len(value) - len(kept)} more items]"]
        out[key] = value
    return out


class EventSink(Protocol):
    async def send(self, event: Event) -> None: ...


class CallbackSink:
    """POSTs each event to the conductor's receiver; raises on failure so a lost submission is an error."""

    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.headers = {TOKEN_HEADER: f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(timeout=10.0)

    async def send(self, event: Event) -> None:
        response = await self._client.post(f"{self.url}/events", content=event.model_dump_json(),
                                           headers={**self.headers, "Content-Type": "application/json"})
        response.raise_for_status()


class JsonLinesSink:
    """Appends events to a file (or stderr when no path is given)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()

    async def send(self, event: Event) -> None:
        line = event.model_dump_json() + "\n"
        with self._lock:
            if self.path is None:
                sys.stderr.write(line)
                sys.stderr.flush()
            else:
                with open(self.path, "a") as f:
                    f.write(line)


def parse_event(data: bytes | str | dict[str, Any]) -> Event:
    """Validate one event body received by the conductor."""
    obj = json.loads(data) if isinstance(data, (bytes, str)) else data
    if obj.get("type") == "submission":
        return SubmissionEvent.model_validate(obj)
    return ToolCallEvent.model_validate(obj)
