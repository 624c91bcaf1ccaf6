"""The NATS JetStream connection and the EVENTS work-queue stream every role shares."""

from __future__ import annotations

import asyncio
import logging

import nats
from aiohttp import web
from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import NotFoundError

from svckit import config, telemetry, web as svcweb

JETSTREAM = web.AppKey("jetstream", JetStreamContext)
NATS = web.AppKey("nats", nats.NATS)
STREAM = "EVENTS"
SUBJECT = "events.recorded"


def attach(app: web.Application, service: str) -> None:
    """Connect to NATS (NATS_URL) with the app, reconnecting forever; readiness needs the stream."""

    async def lifecycle(app: web.Application):
        log = logging.getLogger(service)

        async def on_error(e: Exception) -> None:
            telemetry.DEPENDENCY_ERRORS.labels(service, "nats", "connection").inc()
            telemetry.log(log, logging.WARNING, "stream connection error", error=f"{type(e).__name__}: {e}")

        conn = nats.NATS()
        app[NATS] = conn
        app[JETSTREAM] = conn.jetstream(timeout=config.number("NATS_REQUEST_TIMEOUT_SECONDS", 2.0))

        async def connect() -> None:
            while True:
                try:
                    await conn.connect(servers=config.text("NATS_URL").split(","), error_cb=on_error,
                                       connect_timeout=config.number("NATS_CONNECT_TIMEOUT_SECONDS", 2.0),
                                       max_reconnect_attempts=-1, reconnect_time_wait=1, allow_reconnect=True)
                    return
                except Exception as e:  # noqa: BLE001 - first connect failed: retry, stay NotReady
                    telemetry.log(log, logging.ERROR, "stream unreachable", error=f"{type(e).__name__}: {e}")
                    await asyncio.sleep(2)

        task = asyncio.ensure_future(connect())
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


async def ensure_stream(app: web.Application) -> None:
    """Create the EVENTS work-queue stream if it is missing (idempotent)."""
    try:
        await app[JETSTREAM].stream_info(STREAM)
        return
    except NotFoundError:
        pass
    await app[JETSTREAM].add_stream(StreamConfig(name=STREAM, subjects=["events.>"], retention="workqueue",
                                                 max_age=config.number("STREAM_MAX_AGE_SECONDS", 3600)))
