"""Memcached at CACHE_HOST:CACHE_PORT with item TTLs from config; every miss, hit and error counted."""

from __future__ import annotations

import asyncio
import json
import logging

import aiomcache
from aiohttp import web
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from svckit import config, telemetry, web as svcweb

CACHE = web.AppKey("cache", aiomcache.Client)


def _timeout() -> float:
    return config.number("CACHE_TIMEOUT_SECONDS", 0.5)


def attach(app: web.Application, service: str) -> None:
    """Open the memcached client with the app and make /readyz depend on it."""

    async def lifecycle(app: web.Application):
        app[CACHE] = aiomcache.Client(config.text("CACHE_HOST"), config.integer("CACHE_PORT", 11211),
                                      pool_size=config.integer("CACHE_POOL_SIZE", 4))
        yield
        await app[CACHE].close()

    app.cleanup_ctx.append(lifecycle)

    async def check() -> None:
        await app[CACHE].version()

    if config.flag("CACHE_REQUIRED_FOR_READINESS", True):
        svcweb.add_readiness_check(app, "memcached", check)


async def get(app: web.Application, service: str, key: str):
    """The cached JSON value, or None on a miss. A cache that fails is reported and treated as a miss
    (the database takes the load, which is what an SRE sees as latency)."""
    with trace.get_tracer(service).start_as_current_span("memcached get", kind=SpanKind.CLIENT) as span:
        span.set_attribute("db.system", "memcached")
        try:
            raw = await asyncio.wait_for(app[CACHE].get(key.encode()), _timeout())
        except Exception as e:  # noqa: BLE001 - degrade to the database, loudly
            telemetry.CACHE_OPS.labels(service, "memcached", "error").inc()
            telemetry.DEPENDENCY_ERRORS.labels(service, "memcached", "get").inc()
            telemetry.log(logging.getLogger(service), logging.WARNING, "cache get failed", key=key,
                          error=f"{type(e).__name__}: {e}")
            return None
        telemetry.CACHE_OPS.labels(service, "memcached", "hit" if raw is not None else "miss").inc()
        span.set_attribute("cache.hit", raw is not None)
        return None if raw is None else json.loads(raw)


async def put(app: web.Application, service: str, key: str, value) -> None:
    """Store ``value`` for CACHE_TTL_SECONDS; a failure is counted and logged, not raised."""
    try:
        await asyncio.wait_for(app[CACHE].set(key.encode(), json.dumps(value).encode(),
                                              exptime=config.integer("CACHE_TTL_SECONDS", 60)), _timeout())
    except Exception as e:  # noqa: BLE001
        telemetry.DEPENDENCY_ERRORS.labels(service, "memcached", "set").inc()
        telemetry.log(logging.getLogger(service), logging.WARNING, "cache set failed", key=key,
                      error=f"{type(e).__name__}: {e}")
