"""processor: drains the EVENTS stream into PostgreSQL (the event, the user's summary) and drops the
user's cached summary so the query API reads the new one."""

import asyncio
import json
import logging
import time

from aiohttp import web
from nats.errors import TimeoutError as NatsTimeout
from nats.js.api import ConsumerConfig
from opentelemetry import propagate, trace
from prometheus_client import Counter, Gauge, Histogram

from svckit import config, postgres, telemetry, web as svcweb
from pipeline import cache, schema, stream

SERVICE = "processor"
CONSUMER = "summaries"
PROCESSED = Counter("stream_messages_processed_total", "Stream messages handled, by outcome", ["consumer", "outcome"])
PENDING = Gauge("stream_messages_pending", "Messages waiting in the stream for this consumer", ["consumer"])
LAG = Histogram("stream_message_age_seconds", "Time from ingest to the summary being updated", ["consumer"],
                buckets=telemetry.LATENCY_BUCKETS + (30.0, 60.0, 300.0))

UPSERT = """
INSERT INTO user_summary (username, events, purchases, total_value, last_event_at)
VALUES ($1, 1, $2, $3, now())
ON CONFLICT (username) DO UPDATE SET events = user_summary.events + 1,
  purchases = user_summary.purchases + $2, total_value = user_summary.total_value + $3, last_event_at = now()
"""


async def store(app: web.Application, seq: int, event: dict) -> bool:
    """Record one event and fold it into its user's summary, once (redeliveries are skipped)."""
    async with app[postgres.POOL].acquire(timeout=config.number("DB_ACQUIRE_TIMEOUT_SECONDS", 2.0)) as conn:
        async with conn.transaction():
            added = await conn.fetchval(
                "INSERT INTO events (stream_seq, username, kind, value) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (stream_seq) DO NOTHING RETURNING id", seq, event["user"], event["kind"], event["value"])
            if added is None:
                return False
            await conn.execute(UPSERT, event["user"], int(event["kind"] == "purchase"),
                               event["value"] if event["kind"] == "purchase" else 0.0)
    return True


async def _handle(app: web.Application, msg) -> None:
    headers = msg.headers or {}
    token = telemetry.request_id.set(headers.get("X-Request-ID", ""))
    try:
        with trace.get_tracer(SERVICE).start_as_current_span(
                f"nats process {stream.SUBJECT}", kind=trace.SpanKind.CONSUMER,
                context=propagate.extract(headers)) as span:
            event = json.loads(msg.data)
            try:
                with trace.get_tracer(SERVICE).start_as_current_span("postgres record_event",
                                                                     kind=trace.SpanKind.CLIENT):
                    added = await store(app, msg.metadata.sequence.stream, event)
                if added:
                    try:
                        await cache.call(app, SERVICE, "DEL", schema.cache_key(event["user"]))
                    except Exception as e:  # noqa: BLE001 - a stale summary ages out with its TTL
                        telemetry.log(logging.getLogger(SERVICE), logging.WARNING, "cache invalidation failed",
                                      error=f"{type(e).__name__}: {e}")
                await msg.ack()
                outcome = "stored" if added else "duplicate"
            except Exception as e:  # noqa: BLE001 - redeliver later; the backlog grows, which an SRE can see
                telemetry.DEPENDENCY_ERRORS.labels(SERVICE, "postgres", "record").inc()
                telemetry.log(logging.getLogger(SERVICE), logging.ERROR, "event not stored",
                              error=f"{type(e).__name__}: {e}")
                span.record_exception(e)
                span.set_status(trace.Status(trace.StatusCode.ERROR))
                await msg.nak(delay=config.number("PROCESSOR_RETRY_DELAY_SECONDS", 2.0))
                outcome = "error"
            PROCESSED.labels(CONSUMER, outcome).inc()
            if outcome != "error":
                LAG.labels(CONSUMER).observe(max(0.0, time.time() - msg.metadata.timestamp.timestamp()))
    finally:
        telemetry.request_id.reset(token)


async def consume(app: web.Application):
    log = logging.getLogger(SERVICE)

    async def loop() -> None:
        subscription = None
        while True:
            try:
                if subscription is None:
                    await stream.ensure_stream(app)
                    subscription = await app[stream.JETSTREAM].pull_subscribe(
                        stream.SUBJECT, durable=CONSUMER,
                        config=ConsumerConfig(ack_wait=config.number("PROCESSOR_ACK_WAIT_SECONDS", 30)))
                try:
                    batch = await subscription.fetch(config.integer("PROCESSOR_BATCH", 20), timeout=1)
                except NatsTimeout:
                    batch = []
                await asyncio.gather(*(_handle(app, m) for m in batch))
                info = await subscription.consumer_info()
                PENDING.labels(CONSUMER).set(info.num_pending)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the stream or database is away: wait and retry
                telemetry.DEPENDENCY_ERRORS.labels(SERVICE, "nats", "fetch").inc()
                telemetry.log(log, logging.ERROR, "cannot read the event stream", error=f"{type(e).__name__}: {e}")
                subscription = None
                await asyncio.sleep(2)

    task = asyncio.ensure_future(loop())
    yield
    task.cancel()


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, schema.setup)
    cache.attach(app, SERVICE)
    stream.attach(app, SERVICE)
    app.cleanup_ctx.append(consume)
    svcweb.run(app)
