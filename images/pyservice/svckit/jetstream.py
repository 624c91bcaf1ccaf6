"""NATS JetStream for a service: the connection (NATS_URL, NATS_CONNECT_TIMEOUT_SECONDS,
NATS_REQUEST_TIMEOUT_SECONDS) opened with the app and kept forever, a readiness check that needs
the work-queue stream, and the loop of a durable pull consumer with its metrics."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats
from aiohttp import web
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, StreamConfig
from nats.js.errors import NotFoundError
from opentelemetry import propagate, trace
from prometheus_client import Counter, Gauge, Histogram

from svckit import config, telemetry, web as svcweb
from svckit.workqueue import ERROR, PullConsumer, WorkQueue, counts_towards_age, message_age

JETSTREAM = web.AppKey("jetstream", JetStreamContext)
NATS = web.AppKey("nats", nats.NATS)
QUEUE = web.AppKey("work_queue", WorkQueue)

# handles one message: gets the app, the message, its consumer span and a dict whose entries go on
# the failure log line; returns the outcome to count; raising sends the message back for later
MessageHandler = Callable[[web.Application, Msg, trace.Span, dict], Awaitable[str]]


@dataclass(frozen=True)
class ConsumerMetrics:
    """The app's own metric families for a consumer, each labelled by the consumer's name first."""

    processed: Counter  # (consumer, outcome)
    pending: Gauge
    age: Histogram
    unacknowledged: Gauge | None = None


def attach(app: web.Application, service: str, queue: WorkQueue) -> None:
    """Connect to NATS with the app, retrying the first connect and reconnecting for ever;
    readiness needs the connection and ``queue``'s stream (created if missing)."""
    app[QUEUE] = queue

    async def lifecycle(app: web.Application):
        log = logging.getLogger(service)

        async def on_error(e: Exception) -> None:
            telemetry.DEPENDENCY_ERRORS.labels(service, "nats", "connection").inc()
            telemetry.log(log, logging.WARNING, f"{queue.noun} connection error", error=f"{type(e).__name__}: {e}")

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
                    telemetry.log(log, logging.ERROR, f"{queue.noun} unreachable", error=f"{type(e).__name__}: {e}")
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
    """Create the app's work-queue stream if it is missing (idempotent)."""
    queue = app[QUEUE]
    try:
        await app[JETSTREAM].stream_info(queue.name)
        return
    except NotFoundError:
        pass
    await app[JETSTREAM].add_stream(StreamConfig(name=queue.name, subjects=list(queue.subjects),
                                                 retention="workqueue", max_age=queue.max_age()))


def consumer(service: str, spec: PullConsumer, metrics: ConsumerMetrics, handle: MessageHandler):
    """A cleanup context (``app.cleanup_ctx.append(...)``) that pulls batches while the app runs,
    hands each message to ``handle`` and acknowledges it, and keeps the queue gauges current."""

    async def consume(app: web.Application):
        log = logging.getLogger(service)

        async def loop() -> None:
            subscription = None
            while True:
                try:
                    if subscription is None:
                        await ensure_stream(app)
                        subscription = await app[JETSTREAM].pull_subscribe(
                            spec.subject, durable=spec.durable, config=ConsumerConfig(ack_wait=spec.ack_wait()))
                    try:
                        batch = await subscription.fetch(spec.batch(), timeout=1)
                    except NatsTimeout:
                        batch = []
                    await asyncio.gather(*(_process(app, service, spec, metrics, handle, m) for m in batch))
                    info = await subscription.consumer_info()
                    metrics.pending.labels(spec.durable).set(info.num_pending)
                    if metrics.unacknowledged is not None:
                        metrics.unacknowledged.labels(spec.durable).set(info.num_ack_pending)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - the stream or a store is away: wait and retry
                    telemetry.DEPENDENCY_ERRORS.labels(service, "nats", "fetch").inc()
                    telemetry.log(log, logging.ERROR, spec.read_failure, error=f"{type(e).__name__}: {e}")
                    subscription = None
                    await asyncio.sleep(2)

        task = asyncio.ensure_future(loop())
        yield
        task.cancel()

    return consume


async def _process(app: web.Application, service: str, spec: PullConsumer, metrics: ConsumerMetrics,
                   handle: MessageHandler, msg: Msg) -> None:
    headers = msg.headers or {}
    token = telemetry.request_id.set(headers.get("X-Request-ID", ""))
    try:
        with trace.get_tracer(service).start_as_current_span(
                f"nats process {spec.subject}", kind=trace.SpanKind.CONSUMER,
                context=propagate.extract(headers)) as span:
            fields: dict = {}
            try:
                outcome = await handle(app, msg, span, fields)
                await msg.ack()
            except Exception as e:  # noqa: BLE001 - redeliver later; the backlog grows, which an SRE can see
                telemetry.DEPENDENCY_ERRORS.labels(service, spec.failure_dependency, spec.failure_operation).inc()
                telemetry.log(logging.getLogger(service), logging.ERROR, spec.handle_failure, **fields,
                              error=f"{type(e).__name__}: {e}")
                span.record_exception(e)
                span.set_status(trace.Status(trace.StatusCode.ERROR))
                await msg.nak(delay=spec.retry_delay())
                outcome = ERROR
            metrics.processed.labels(spec.durable, outcome).inc()
            if counts_towards_age(outcome):
                metrics.age.labels(spec.durable).observe(message_age(msg.metadata.timestamp.timestamp(), time.time()))
    finally:
        telemetry.request_id.reset(token)
