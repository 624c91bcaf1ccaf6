"""A real local HTTP server that speaks the OpenAI chat-completions API and plays back a script.

Tests (and offline demos) point an LLM agent or the diagnosis judge at it instead of a paid model:
every ``POST /v1/chat/completions`` is answered with the next scripted :class:`Reply` (text, tool
calls, malformed tool-call JSON, unknown tool names, chosen token usage, HTTP errors) and recorded,
so a test can assert on the prompts and tools the client sent::

    with PlaybackServer([tool_call("kubectl", {"args": ["get", "pods"]}), text("done")]) as srv:
        client = ChatClient(srv.base_url, "playback")
        ...
        assert "checkout" in srv.requests[0].json["messages"][0]["content"]

It binds 127.0.0.1 on a free port and runs in a daemon thread of the test process.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from pydantic import BaseModel, Field


class ScriptedToolCall(BaseModel):
    """A tool call to send. ``arguments`` as a string is sent verbatim (e.g. broken JSON)."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class Reply(BaseModel):
    """One scripted answer. ``status`` != 200 sends an error; ``raw_body`` sends exactly that text."""

    content: str | None = None
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list)
    prompt_tokens: int = 50
    completion_tokens: int = 10
    finish_reason: str | None = None
    status: int = 200
    raw_body: str | None = None
    delay_s: float = 0.0


def text(content: str, **usage: Any) -> Reply:
    """A plain assistant message (no tool calls)."""
    return Reply(content=content, **usage)


def tool_call(name: str, arguments: dict[str, Any] | None = None, *, content: str | None = None,
              **usage: Any) -> Reply:
    """An assistant turn with one well-formed tool call (``name`` may be a tool the client lacks)."""
    return Reply(content=content, tool_calls=[ScriptedToolCall(name=name, arguments=arguments or {})], **usage)


def raw_tool_call(name: str, arguments: str, **usage: Any) -> Reply:
    """An assistant turn whose tool-call arguments are the given text (malformed JSON, a list, ...)."""
    return Reply(tool_calls=[ScriptedToolCall(name=name, arguments=arguments)], **usage)


@dataclass(frozen=True)
class RecordedRequest:
    """What one client request looked like."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


class PlaybackServer:
    """Context manager: a threaded HTTP server on 127.0.0.1:<free port> that plays ``script``.

    ``on_exhausted``: ``"error"`` answers HTTP 400 once the script is used up (a test that asks
    for more than it scripted fails loudly); ``"repeat_last"`` keeps sending the last reply.
    """

    def __init__(self, script: list[Reply], *, model: str = "playback",
                 on_exhausted: Literal["error", "repeat_last"] = "error") -> None:
        self.script = list(script)
        self.model = model
        self.on_exhausted = on_exhausted
        self.requests: list[RecordedRequest] = []
        self._served = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the playback server is not running (use it as a context manager)")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI-compatible client (ends in /v1)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def served(self) -> int:
        """How many scripted replies were sent."""
        return self._served

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    def start(self) -> PlaybackServer:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="llm-playback", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> PlaybackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self) -> Reply | None:
        with self._lock:
            if self._served < len(self.script):
                reply = self.script[self._served]
                self._served += 1
                return reply
            if self.on_exhausted == "repeat_last" and self.script:
                self._served += 1
                return self.script[-1]
            return None

    def completion_body(self, reply: Reply, number: int) -> dict[str, Any]:
        """The chat-completions JSON for ``reply`` (the ``number``-th answer)."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.id or f"call_{number}_{i}", "type": "function",
                 "function": {"name": c.name,
                              "arguments": c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)}}
                for i, c in enumerate(reply.tool_calls)]
        finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
        return {
            "id": f"chatcmpl-playback-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                      "total_tokens": reply.prompt_tokens + reply.completion_tokens},
        }


def _handler_for(server: PlaybackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass  # keep test output clean

        def _send(self, status: int, body: str | dict[str, Any]) -> None:
            data = (body if isinstance(body, str) else json.dumps(body)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, payload: Any) -> None:
            with server._lock:
                server.requests.append(RecordedRequest(self.command, self.path, dict(self.headers.items()), payload))

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode(errors="replace")
            try:
                payload: Any = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                payload = raw
            self._record(payload)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            if isinstance(payload, dict) and payload.get("stream"):
                self._send(400, {"error": {"message": "the playback server does not stream"}})
                return
            reply = server._next_reply()
            if reply is None:
                self._send(400, {"error": {"message": f"playback script exhausted after {len(server.script)} replies"}})
                return
            if reply.delay_s:
                time.sleep(reply.delay_s)
            if reply.raw_body is not None:
                self._send(reply.status, reply.raw_body)
            elif reply.status != 200:
                self._send(reply.status, {"error": {"message": f"scripted HTTP {reply.status}"}})
            else:
                self._send(200, server.completion_body(reply, server.served))

    return Handler
