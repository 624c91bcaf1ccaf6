"""The MCP endpoint's per-run bearer token: minted by whoever starts the server, checked on every request.

Each agent plane (one run, one cell of a parallel suite) mints its own token and gives it to the
server in the environment (never on the command line: argv shows in ``ps``) and to its agent in the
task. A request without it, or with another plane's token, gets HTTP 401, so parallel cells cannot
reach each other's tools. The SDK's own auth hooks are built for OAuth resource servers (an issuer
URL, token introspection); a fixed per-run secret needs only this small ASGI gate.
"""

from __future__ import annotations

import hmac
import json
import secrets
from typing import Any

MCP_TOKEN_ENV = "SREGYM_MCP_TOKEN"
MIN_TOKEN_CHARS = 16


def mint_token() -> str:
    """A fresh random token (256 bits)."""
    return secrets.token_urlsafe(32)


def auth_headers(token: str | None) -> dict[str, str]:
    """The HTTP header a client sends with ``token`` (none without a token)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


class BearerTokenGate:
    """ASGI middleware: an HTTP request passes only with ``Authorization: Bearer <token>``; else 401."""

    def __init__(self, app: Any, token: str) -> None:
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError(f"the MCP token must be at least {MIN_TOKEN_CHARS} characters")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    def allows(self, scope: dict[str, Any]) -> bool:
        sent = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
        return len(sent) == 1 and hmac.compare_digest(sent[0], self._expected)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and not self.allows(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            body = json.dumps({"error": "unauthorized", "detail": f"send the run's token: "
                               f"Authorization: Bearer ${MCP_TOKEN_ENV}"}).encode()
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
