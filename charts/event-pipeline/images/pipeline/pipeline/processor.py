"""processor: drains the EVENTS stream into PostgreSQL (the event, the user's summary) and drops the
user's cached summary so the query API reads the new one."""

import json
import logging

from aiohttp import web
from opentelemetry import trace
from prometheus_client import Counter, Gauge, Histogram

from svckit import config, jetstream, postgres, redis_store, telemetry, web as svcweb
from pipeline import schema, stream

SERVICE = "processor"
PROCESSED = Counter("stream_messages_processed_total", "Stream messages handled, by outcome", ["consumer", "outcome"])
PENDING = Gauge("stream_messages_pending", "Messages waiting in the stream for this consumer", ["consumer"])
LAG = Histogram("stream_message_age_seconds", "Time from ingest to the summary being updated", ["consumer"],
                buckets=telemetry.LATENCY_BUCKETS + (30.0, 60.0, 300.0))
METRICS = jetstream.ConsumerMetrics(processed=PROCESSED, pending=PENDING, age=LAG)

UPSERT = """
INSERT INTO user_summary (username, events, purchases, total_value, last_event_at)
VALUES ($1, 1, $2, $3, now())
ON CONFLICT (username) DO UPDATE SET events = user_summary.events + 1,
  purchases = user_summary.purchases + $2, total_value = user_summary.total_value + $3, last_event_at = now()
"""


async def store(app: web.Application, event_id: str, seq: int, event: dict) -> bool:
    """Record one event and fold it into its user's summary, once per event id (a redelivery is
    skipped; the stream sequence is kept for tracing only, as it starts again with a new stream)."""
    async with app[postgres.POOL].acquire(timeout=config.number("DB_ACQUIRE_TIMEOUT_SECONDS", 2.0)) as conn:
        async with conn.transaction():
            added = await conn.fetchval(
                "INSERT INTO events (event_id, stream_seq, username, kind, value) VALUES ($1, $2, $3, $4, $5)"
                " ON CONFLICT (event_id) DO NOTHING RETURNING id",
                event_id, seq, event["user"], event["kind"], event["value"])
            if added is None:
                return False
            await conn.execute(UPSERT, event["user"], int(event["kind"] == "purchase"),
                               event["value"] if event["kind"] == "purchase" else 0.0)
    return True


async def _handle(app: web.Application, msg, span, fields: dict) -> str:
    """Store one event; a redelivered one is counted as a duplicate."""
    event = json.loads(msg.data)
    seq = msg.metadata.sequence.stream
    eid = schema.event_id(event, msg.headers, seq, msg.metadata.timestamp.isoformat())
    fields["event_id"] = eid
    with trace.get_tracer(SERVICE).start_as_current_span("postgres record_event", kind=trace.SpanKind.CLIENT):
        added = await store(app, eid, seq, event)
    if added:
        try:
            await redis_store.call(app, SERVICE, "DEL", schema.cache_key(event["user"]))
        except Exception as e:  # noqa: BLE001 - a stale summary ages out with its TTL
            telemetry.log(logging.getLogger(SERVICE), logging.WARNING, "cache invalidation failed",
                          error=f"{type(e).__name__}: {e}")
    return "stored" if added else "duplicate"


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, schema.setup)
    redis_store.attach(app)
    jetstream.attach(app, SERVICE, stream.EVENTS)
    app.cleanup_ctx.append(jetstream.consumer(SERVICE, stream.SUMMARIES, METRICS, _handle))
    svcweb.run(app)
