"""Redis (with its password from a Secret) and the NATS JetStream order queue."""

from __future__ import annotations

import asyncio
import logging

import nats
import redis.asyncio as aioredis
from aiohttp import web
from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from svckit import config, telemetry, web as svcweb

REDIS = web.AppKey("redis", aioredis.Redis)
JETSTREAM = web.AppKey("jetstream", JetStreamContext)
NATS = web.AppKey("nats", nats.NATS)
ORDERS_SUBJECT = "orders.created"


def attach_redis(app: web.Application, service: str) -> None:
    """Open the Redis client with the app (REDIS_HOST, REDIS_PORT, REDIS_PASSWORD, REDIS_TIMEOUT_SECONDS)."""

    async def lifecycle(app: web.Application):
        timeout = config.number("REDIS_TIMEOUT_SECONDS", 0.5)
        # a blocking pool: when every connection is busy a command waits (up to the timeout) instead of failing
        pool = aioredis.BlockingConnectionPool(
            host=config.text("REDIS_HOST"), port=config.integer("REDIS_PORT", 6379),
            password=config.text("REDIS_PASSWORD") or None, socket_timeout=timeout, socket_connect_timeout=timeout,
            max_connections=config.integer("REDIS_POOL_SIZE", 10), timeout=timeout, decode_responses=True)
        app[REDIS] = aioredis.Redis(connection_pool=pool)
        yield
        await app[REDIS].aclose()
        await pool.disconnect()

    app.cleanup_ctx.append(lifecycle)

    async def check() -> None:
        await app[REDIS].ping()

    svcweb.add_readiness_check(app, "redis", check)


async def redis_call(app: web.Application, service: str, operation: str, *args):
    """Run one Redis command in a client span; count failures and re-raise them."""
    with trace.get_tracer(service).start_as_current_span(f"redis {operation}", kind=SpanKind.CLIENT) as span:
        span.set_attribute("db.system", "redis")
        try:
            return await app[REDIS].execute_command(operation, *args)
        except Exception:
            telemetry.DEPENDENCY_ERRORS.labels(service, "redis", operation.lower()).inc()
            raise


def attach_queue(app: web.Application, service: str) -> None:
    """Connect to NATS (NATS_URL) with the app and make sure the ORDERS stream exists."""

    async def lifecycle(app: web.Application):
        log = logging.getLogger(service)

        async def on_error(e: Exception) -> None:
            telemetry.DEPENDENCY_ERRORS.labels(service, "nats", "connection").inc()
            telemetry.log(log, logging.WARNING, "queue connection error", error=f"{type(e).__name__}: {e}")

        conn = nats.NATS()
        app[NATS] = conn
        connect = conn.connect(servers=config.text("NATS_URL").split(","), error_cb=on_error,
                               connect_timeout=config.number("NATS_CONNECT_TIMEOUT_SECONDS", 2.0),
                               max_reconnect_attempts=-1, reconnect_time_wait=1, allow_reconnect=True)
        task = asyncio.ensure_future(_connect_until_up(conn, connect, log))
        app[JETSTREAM] = conn.jetstream(timeout=config.number("NATS_REQUEST_TIMEOUT_SECONDS", 2.0))
        yield
        task.cancel()
        if conn.is_connected:
            await conn.close()

    app.cleanup_ctx.append(lifecycle)

    async def check() -> None:
        if not app[NATS].is_connected:
            raise ConnectionError("not connected to NATS")
        await ensure_stream(app)

    svcweb.add_readiness_check(app, "nats", check)


async def _connect_until_up(conn: nats.NATS, connect, log: logging.Logger) -> None:
    try:
        await connect
    except Exception as e:  # noqa: BLE001 - first connect failed: keep retrying, stay NotReady
        telemetry.log(log, logging.ERROR, "queue unreachable", error=f"{type(e).__name__}: {e}")
        await asyncio.sleep(2)
        await _connect_until_up(conn, conn.connect(servers=config.text("NATS_URL").split(","),
                                                   max_reconnect_attempts=-1, reconnect_time_wait=1), log)


async def ensure_stream(app: web.Application) -> None:
    """Create the ORDERS work-queue stream if it is missing (idempotent)."""
    try:
        await app[JETSTREAM].stream_info("ORDERS")
        return
    except NotFoundError:
        pass
    await app[JETSTREAM].add_stream(StreamConfig(name="ORDERS", subjects=["orders.>"], retention="workqueue",
                                                 max_age=config.number("QUEUE_MAX_AGE_SECONDS", 86400)))
