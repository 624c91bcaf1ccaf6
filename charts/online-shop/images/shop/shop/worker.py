"""worker: takes orders off the NATS JetStream queue and fulfils them in PostgreSQL (stock, status)."""

import json
import logging

from aiohttp import web
from opentelemetry import trace
from prometheus_client import Counter, Gauge, Histogram

from svckit import config, jetstream, postgres, telemetry, web as svcweb
from shop import stores

SERVICE = "worker"
PROCESSED = Counter("queue_messages_processed_total", "Queue messages handled, by outcome", ["queue", "outcome"])
PENDING = Gauge("queue_messages_pending", "Messages waiting in the queue for this consumer", ["queue"])
UNACKED = Gauge("queue_messages_unacknowledged", "Messages delivered and not yet acknowledged", ["queue"])
AGE = Histogram("queue_message_age_seconds", "Time from enqueue to fulfilment", ["queue"],
                buckets=telemetry.LATENCY_BUCKETS + (30.0, 60.0, 300.0))
METRICS = jetstream.ConsumerMetrics(processed=PROCESSED, pending=PENDING, age=AGE, unacknowledged=UNACKED)


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


async def _handle(app: web.Application, msg, span, fields: dict) -> str:
    """Fulfil one queued order; an order out of stock is rejected (and leaves the queue)."""
    order_id = json.loads(msg.data)["orderId"]
    span.set_attribute("order.id", order_id)
    fields["order_id"] = order_id
    try:
        with trace.get_tracer(SERVICE).start_as_current_span("postgres fulfil_order", kind=trace.SpanKind.CLIENT):
            return await fulfil(app, order_id)
    except _OutOfStock:
        async with app[postgres.POOL].acquire() as conn:
            await conn.execute("UPDATE orders SET status = 'rejected' WHERE id = $1", order_id)
        return "rejected"


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE)
    jetstream.attach(app, SERVICE, stores.ORDERS)
    app.cleanup_ctx.append(jetstream.consumer(SERVICE, stores.FULFILMENT, METRICS, _handle))
    svcweb.run(app)
