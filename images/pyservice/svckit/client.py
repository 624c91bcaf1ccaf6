"""Calls to other services: trace and request-id propagation, a timeout and retries from config."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
from aiohttp import web
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from svckit import config, telemetry


class DownstreamError(Exception):
    """A call to another service failed after its retries; carries the last status (0 = no answer)."""

    def __init__(self, target: str, status: int, detail: str) -> None:
        super().__init__(f"{target} failed: {detail}")
        self.target, self.status = target, status


class Downstream:
    """One other service, at ``<NAME>_ADDR`` with ``<NAME>_TIMEOUT_SECONDS`` and ``<NAME>_RETRIES``."""

    def __init__(self, service: str, target: str, session: aiohttp.ClientSession) -> None:
        key = target.upper().replace("-", "_")
        self.service, self.target, self.session = service, target, session
        self.base = "http://" + config.text(f"{key}_ADDR")
        self.timeout = config.number(f"{key}_TIMEOUT_SECONDS", config.number("CALL_TIMEOUT_SECONDS", 2.0))
        self.retries = config.integer(f"{key}_RETRIES", config.integer("CALL_RETRIES", 2))
        self.backoff = config.number("CALL_BACKOFF_SECONDS", 0.05)

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """Return the decoded JSON answer; retry on no answer or a 5xx; raise DownstreamError."""
        tracer = trace.get_tracer(self.service)
        last_status, detail = 0, ""
        started = time.perf_counter()
        with tracer.start_as_current_span(f"{method} {self.target}{path.split('?')[0]}", kind=SpanKind.CLIENT) as span:
            span.set_attribute("peer.service", self.target)
            for attempt in range(self.retries + 1):
                if attempt:
                    telemetry.CALL_RETRIES.labels(self.service, self.target).inc()
                    await asyncio.sleep(self.backoff * (2 ** (attempt - 1)))
                headers = {"X-Request-ID": telemetry.request_id.get()}
                propagate.inject(headers)
                try:
                    async with self.session.request(method, self.base + path, headers=headers,
                                                    timeout=aiohttp.ClientTimeout(total=self.timeout), **kwargs) as r:
                        last_status = r.status
                        body = await r.json(content_type=None)
                        if r.status < 500:
                            outcome = "ok" if r.status < 400 else "client_error"
                            telemetry.CALLS.labels(self.service, self.target, outcome).inc()
                            telemetry.CALL_LATENCY.labels(self.service, self.target).observe(time.perf_counter() - started)
                            if r.status >= 400:
                                raise DownstreamError(self.target, r.status, str(body)[:200])
                            return body
                        detail = f"HTTP {r.status}: {str(body)[:200]}"
                except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                    last_status, detail = 0, f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                telemetry.log(logging.getLogger(self.service), logging.WARNING, "call failed", target=self.target,
                              attempt=attempt + 1, error=detail)
            telemetry.CALLS.labels(self.service, self.target, "error").inc()
            telemetry.CALL_LATENCY.labels(self.service, self.target).observe(time.perf_counter() - started)
            span.set_status(Status(StatusCode.ERROR, detail))
            raise DownstreamError(self.target, last_status, detail)


DOWNSTREAMS = web.AppKey("downstreams", dict)


def attach(app: web.Application, service: str, targets: list[str]) -> None:
    """Create one pooled HTTP session and a Downstream per target when ``app`` starts."""

    async def lifecycle(app: web.Application):
        # One connection per call unless CALL_KEEPALIVE is set: a kept-alive connection outlives a
        # Service change (kube-proxy leaves established flows alone), so a wrong targetPort or
        # selector would only show once the pool happened to reconnect.
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            limit=config.integer("CALL_POOL_SIZE", 50), force_close=not config.flag("CALL_KEEPALIVE", False)))
        app[DOWNSTREAMS] = {t: Downstream(service, t, session) for t in targets}
        yield
        await session.close()

    app.cleanup_ctx.append(lifecycle)


def downstream(request: web.Request, target: str) -> Downstream:
    """The Downstream for ``target`` of the app serving ``request``."""
    return request.app[DOWNSTREAMS][target]
