"""A PostgreSQL connection pool sized from config, with its gauges and a readiness check."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import asyncpg
from aiohttp import web
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from svckit import config, telemetry, web as svcweb

POOL = web.AppKey("pool", asyncpg.Pool)
SchemaSetup = Callable[[asyncpg.Connection], Awaitable[None]]


def dsn_settings() -> dict:
    """Connection settings from DB_HOST, DB_PORT, DB_NAME, DB_USER, DB_PASSWORD."""
    return {
        "host": config.text("DB_HOST"),
        "port": config.integer("DB_PORT", 5432),
        "database": config.text("DB_NAME"),
        "user": config.text("DB_USER"),
        "password": config.text("DB_PASSWORD"),
    }


def attach(app: web.Application, service: str, setup: SchemaSetup | None = None) -> None:
    """Open the pool when ``app`` starts (connections are made lazily, so a database that is down
    leaves the service running and NotReady rather than crashing), run ``setup`` once the database
    answers, and keep the pool gauges current."""

    async def lifecycle(app: web.Application):
        max_size = config.integer("DB_POOL_SIZE", 5)
        pool = await asyncpg.create_pool(
            **dsn_settings(), min_size=0, max_size=max_size,
            timeout=config.number("DB_CONNECT_TIMEOUT_SECONDS", 3.0),
            command_timeout=config.number("DB_QUERY_TIMEOUT_SECONDS", 5.0),
            max_inactive_connection_lifetime=60)
        app[POOL] = pool
        telemetry.POOL_MAX.labels(service).set(max_size)
        log = logging.getLogger(service)

        async def maintain() -> None:
            schema_ready = setup is None
            while True:
                if not schema_ready:
                    try:
                        async with pool.acquire(timeout=config.number("DB_ACQUIRE_TIMEOUT_SECONDS", 2.0)) as conn:
                            await setup(conn)
                        schema_ready = True
                        telemetry.log(log, logging.INFO, "database schema ready")
                    except Exception as e:  # noqa: BLE001 - keep trying; readiness reports the failure
                        telemetry.DEPENDENCY_ERRORS.labels(service, "postgres", "setup").inc()
                        telemetry.log(log, logging.ERROR, "database unavailable", error=f"{type(e).__name__}: {e}")
                size, idle = pool.get_size(), pool.get_idle_size()
                telemetry.POOL_SIZE.labels(service, "open").set(size)
                telemetry.POOL_SIZE.labels(service, "idle").set(idle)
                telemetry.POOL_SIZE.labels(service, "in_use").set(size - idle)
                await asyncio.sleep(1 if schema_ready else 3)

        task = asyncio.ensure_future(maintain())
        yield
        task.cancel()
        await pool.close()

    app.cleanup_ctx.append(lifecycle)

    async def check() -> None:
        async with app[POOL].acquire(timeout=config.number("DB_ACQUIRE_TIMEOUT_SECONDS", 2.0)) as conn:
            await conn.fetchval("SELECT 1")

    svcweb.add_readiness_check(app, "postgres", check)


async def fetch(app: web.Application, service: str, operation: str, query: str, *args):
    """Run a query on a pooled connection; count failures by operation."""
    with trace.get_tracer(service).start_as_current_span(f"postgres {operation}", kind=SpanKind.CLIENT) as span:
        span.set_attribute("db.system", "postgresql")
        span.set_attribute("db.operation", operation)
        try:
            async with app[POOL].acquire(timeout=config.number("DB_ACQUIRE_TIMEOUT_SECONDS", 2.0)) as conn:
                return await conn.fetch(query, *args)
        except Exception as e:
            telemetry.DEPENDENCY_ERRORS.labels(service, "postgres", operation).inc()
            span.record_exception(e)
            span.set_status(Status(StatusCode.ERROR, type(e).__name__))
            raise
