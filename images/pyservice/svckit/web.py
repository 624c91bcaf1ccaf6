"""The HTTP server side: tracing/metrics/log middleware, health probes and the run loop."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from aiohttp import web
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from svckit import config, telemetry

ReadinessCheck = Callable[[], Awaitable[None]]
SERVICE = web.AppKey("service", str)
CHECKS = web.AppKey("checks", dict)


def _route_name(request: web.Request) -> str:
    info = request.match_info.route.resource
    return info.canonical if info is not None else "unmatched"


@web.middleware
async def observe(request: web.Request, handler):
    """Continue the caller's trace and request id; count, time and log every request."""
    service = request.app[SERVICE]
    route = _route_name(request)
    if route in ("/metrics", "/healthz", "/readyz"):
        return await handler(request)
    rid = request.headers.get("X-Request-ID") or uuid.uuid4().hex
    token = telemetry.request_id.set(rid)
    tracer = trace.get_tracer(service)
    started = time.perf_counter()
    code = 500
    telemetry.HTTP_INFLIGHT.labels(service).inc()
    try:
        with tracer.start_as_current_span(f"{request.method} {route}", kind=SpanKind.SERVER,
                                          context=propagate.extract(request.headers)) as span:
            span.set_attribute("http.request.method", request.method)
            span.set_attribute("http.route", route)
            span.set_attribute("request.id", rid)
            try:
                response = await handler(request)
                code = response.status
            except web.HTTPException as e:
                code = e.status
                raise
            except Exception as e:  # noqa: BLE001 - every unexpected error is a 500 with a log line
                span.record_exception(e)
                logging.getLogger(service).exception("request failed", extra={"fields": {"route": route}})
                response = web.json_response({"error": f"{type(e).__name__}: {e}", "request_id": rid}, status=500)
                code = 500
            finally:
                span.set_attribute("http.response.status_code", code)
                if code >= 500:
                    span.set_status(Status(StatusCode.ERROR))
            response.headers["X-Request-ID"] = rid
            return response
    finally:
        elapsed = time.perf_counter() - started
        telemetry.HTTP_INFLIGHT.labels(service).dec()
        telemetry.HTTP_REQUESTS.labels(service, route, request.method, str(code)).inc()
        telemetry.HTTP_LATENCY.labels(service, route).observe(elapsed)
        level = logging.WARNING if code >= 500 else logging.INFO
        telemetry.log(logging.getLogger(service), level, "request", method=request.method, route=route,
                      status=code, duration_ms=round(elapsed * 1000, 1))
        telemetry.request_id.reset(token)


async def _metrics(_: web.Request) -> web.Response:
    return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _live(_: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _ready(request: web.Request) -> web.Response:
    """Ready only when every dependency answers now: a broken database makes the pod NotReady."""
    service = request.app[SERVICE]
    timeout = config.number("READINESS_TIMEOUT_SECONDS", 2.0)
    failures = {}
    for name, check in request.app[CHECKS].items():
        try:
            await asyncio.wait_for(check(), timeout)
            telemetry.DEPENDENCY_UP.labels(service, name).set(1)
        except Exception as e:  # noqa: BLE001 - any failure means not ready; say which and why
            telemetry.DEPENDENCY_UP.labels(service, name).set(0)
            failures[name] = f"{type(e).__name__}: {e}"[:300]
    if failures:
        telemetry.log(logging.getLogger(service), logging.WARNING, "not ready", failures=failures)
        return web.json_response({"status": "unavailable", "failures": failures}, status=503)
    return web.json_response({"status": "ok"})


def make_app(service: str) -> web.Application:
    """An aiohttp app with the observe middleware and /metrics, /healthz, /readyz routes."""
    app = web.Application(middlewares=[observe])
    app[SERVICE] = service
    app[CHECKS] = {}
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/healthz", _live)
    app.router.add_get("/readyz", _ready)
    return app


def add_readiness_check(app: web.Application, name: str, check: ReadinessCheck) -> None:
    """Register a dependency that /readyz must reach."""
    app[CHECKS][name] = check


def run(app: web.Application) -> None:
    """Serve on PORT (default 8080) until SIGTERM."""
    web.run_app(app, host="0.0.0.0", port=config.integer("PORT", 8080), access_log=None, print=None)
