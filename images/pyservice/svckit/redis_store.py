"""A Redis client opened with the app (REDIS_HOST, REDIS_PORT, REDIS_PASSWORD, REDIS_TIMEOUT_SECONDS,
REDIS_POOL_SIZE), its readiness check, and commands in client spans with their failures counted."""

from __future__ import annotations

import redis.asyncio as aioredis
from aiohttp import web
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from svckit import config, telemetry, web as svcweb

REDIS = web.AppKey("redis", aioredis.Redis)


def attach(app: web.Application) -> None:
    """Open the client when ``app`` starts; readiness needs a PING to answer."""

    async def lifecycle(app: web.Application):
        timeout = config.number("REDIS_TIMEOUT_SECONDS", 0.5)
        # a blocking pool: when every connection is busy a command waits (up to the timeout) instead of failing
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
    """Run one Redis command in a client span; count failures and re-raise them."""
    with trace.get_tracer(service).start_as_current_span(f"redis {operation}", kind=SpanKind.CLIENT) as span:
        span.set_attribute("db.system", "redis")
        try:
            return await app[REDIS].execute_command(operation, *args)
        except Exception:
            telemetry.DEPENDENCY_ERRORS.labels(service, "redis", operation.lower()).inc()
            raise
