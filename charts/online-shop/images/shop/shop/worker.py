"""worker: takes orders off the NATS JetStream queue and fulfils them in PostgreSQL (stock, status)."""

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
from shop import stores

SERVICE = "worker"
CONSUMER = "fulfilment"
PROCESSED = Counter("queue_messages_processed_total", "Queue messages handled, by outcome", ["queue", "outcome"])
PENDING = Gauge("queue_messages_pending", "Messages waiting in the queue for this consumer", ["queue"])
UNACKED = Gauge("queue_messages_unacknowledged", "Messages delivered and not yet acknowledged", ["queue"])
AGE = Histogram("queue_message_age_seconds", "Time from enqueue to fulfilment", ["queue"],
                buckets=telemetry.LATENCY_BUCKETS + (30.0, 60.0, 300.0))


async def fulfil(app: web.Application, order_id: int) -> str:
    """Take stock for every item of the order in one transaction; return the new status."""
    log = logging.getLogger(SERVICE)
    async with app[postgres.POOL].acquire(timeout=config.number("DB_ACQUIRE_TIMEOUT_SECONDS", 2.0)) as conn:
        async with conn.transaction():
            order = await conn.fetchrow("SELECT items, status FROM orders WHERE id = $1 FOR UPDATE", order_id)
            if order is None or order["status"] != "pending":
                return "skipped"
            status = "fulfilled"
            for item in json.loads(order["items"]):
                left = await conn.fetchval("UPDATE products SET stock = stock - $2 WHERE id = $1 AND stock >= $2"
                                           " RETURNING stock", item["productId"], item["quantity"])
                if left is None:
                    status = "rejected"
                    break
            if status == "rejected":
                raise _OutOfStock(order_id)
            await conn.execute("UPDATE orders SET status = $2, fulfilled_at = now() WHERE id = $1", order_id, status)
    telemetry.log(log, logging.INFO, "order fulfilled", order_id=order_id)
    return status


class _OutOfStock(Exception):
    pass


async def _handle(app: web.Application, msg) -> None:
    headers = msg.headers or {}
    token = telemetry.request_id.set(headers.get("X-Request-ID", ""))
    tracer = trace.get_tracer(SERVICE)
    try:
        with tracer.start_as_current_span("nats process orders.created", kind=trace.SpanKind.CONSUMER,
                                          context=propagate.extract(headers)) as span:
            order_id = json.loads(msg.data)["orderId"]
            span.set_attribute("order.id", order_id)
            try:
                with trace.get_tracer(SERVICE).start_as_current_span("postgres fulfil_order", kind=trace.SpanKind.CLIENT):
                    outcome = await fulfil(app, order_id)
                await msg.ack()
            except _OutOfStock:
                async with app[postgres.POOL].acquire() as conn:
                    await conn.execute("UPDATE orders SET status = 'rejected' WHERE id = $1", order_id)
                await msg.ack()
                outcome = "rejected"
            except Exception as e:  # noqa: BLE001 - redeliver later; the queue grows, which an SRE can see
                telemetry.DEPENDENCY_ERRORS.labels(SERVICE, "postgres", "fulfil").inc()
                telemetry.log(logging.getLogger(SERVICE), logging.ERROR, "order failed", order_id=order_id,
                              error=f"{type(e).__name__}: {e}")
                span.record_exception(e)
                span.set_status(trace.Status(trace.StatusCode.ERROR))
                await msg.nak(delay=config.number("WORKER_RETRY_DELAY_SECONDS", 2.0))
                outcome = "error"
            PROCESSED.labels(CONSUMER, outcome).inc()
            if outcome != "error":
                AGE.labels(CONSUMER).observe(max(0.0, time.time() - msg.metadata.timestamp.timestamp()))
    finally:
        telemetry.request_id.reset(token)


async def consume(app: web.Application):
    """Pull batches from the durable consumer while the app runs; keep the queue gauges current."""
    log = logging.getLogger(SERVICE)

    async def loop() -> None:
        subscription = None
        while True:
            try:
                if subscription is None:
                    await stores.ensure_stream(app)
                    subscription = await app[stores.JETSTREAM].pull_subscribe(
                        stores.ORDERS_SUBJECT, durable=CONSUMER,
                        config=ConsumerConfig(ack_wait=config.number("WORKER_ACK_WAIT_SECONDS", 30)))
                try:
                    batch = await subscription.fetch(config.integer("WORKER_BATCH", 10), timeout=1)
                except NatsTimeout:
                    batch = []
                await asyncio.gather(*(_handle(app, m) for m in batch))
                info = await subscription.consumer_info()
                PENDING.labels(CONSUMER).set(info.num_pending)
                UNACKED.labels(CONSUMER).set(info.num_ack_pending)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the queue or database is away: wait and retry
                telemetry.DEPENDENCY_ERRORS.labels(SERVICE, "nats", "fetch").inc()
                telemetry.log(log, logging.ERROR, "cannot read the order queue", error=f"{type(e).__name__}: {e}")
                subscription = None
                await asyncio.sleep(2)

    task = asyncio.ensure_future(loop())
    yield
    task.cancel()


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE)
    stores.attach_queue(app, SERVICE)
    app.cleanup_ctx.append(consume)
    svcweb.run(app)
