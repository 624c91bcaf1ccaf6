"""The Redis cache of user summaries (REDIS_HOST, REDIS_PORT, REDIS_PASSWORD, REDIS_TIMEOUT_SECONDS)."""

from __future__ import annotations

import redis.asyncio as aioredis
from aiohttp import web
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from svckit import config, telemetry, web as svcweb

REDIS = web.AppKey("redis", aioredis.Redis)


def attach(app: web.Application, service: str) -> None:
    async def lifecycle(app: web.Application):
        timeout = config.number("REDIS_TIMEOUT_SECONDS", 0.5)
        pool = aioredis.BlockingConnectionPool(
            host=config.text("REDIS_HOST"), port=config.integer("REDIS_PORT", 6379),
            password=config.text("REDIS_PASSWORD", "") or None, socket_timeout=timeout,
            socket_connect_timeout=timeout, max_connections=config.integer("REDIS_POOL_SIZE", 10), timeout=timeout,
            decode_responses=True)
        app[REDIS] = aioredis.Redis(connection_pool=pool)
        yield
        await app[REDIS].aclose()
        await pool.disconnect()

    app.cleanup_ctx.append(lifecycle)

    async def check() -> None:
        await app[REDIS].ping()

    svcweb.add_readiness_check(app, "redis", check)


async def call(app: web.Application, service: str, operation: str, *args):
    """One Redis command in a client span; failures are counted and re-raised."""
    with trace.get_tracer(service).start_as_current_span(f"redis {operation}", kind=SpanKind.CLIENT) as span:
        span.set_attribute("db.system", "redis")
        try:
            return await app[REDIS].execute_command(operation, *args)
        except Exception:
            telemetry.DEPENDENCY_ERRORS.labels(service, "redis", operation.lower()).inc()
            raise
