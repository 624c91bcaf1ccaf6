"""The ORDERS work queue on NATS JetStream: the api publishes to it, the workers fulfil from it."""

from svckit.workqueue import PullConsumer, WorkQueue

ORDERS_SUBJECT = "orders.created"
ORDERS = WorkQueue(name="ORDERS", subjects=("orders.>",), max_age_setting="QUEUE_MAX_AGE_SECONDS",
                   max_age_default=86400, noun="queue")
FULFILMENT = PullConsumer(durable="fulfilment", subject=ORDERS_SUBJECT, settings_prefix="WORKER",
                          batch_default=10, read_failure="cannot read the order queue",
                          handle_failure="order failed", failure_dependency="postgres", failure_operation="fulfil")
