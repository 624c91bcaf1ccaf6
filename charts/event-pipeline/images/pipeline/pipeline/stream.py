"""The EVENTS work queue on NATS JetStream: ingest publishes to it, the processor drains it."""

from svckit.workqueue import PullConsumer, WorkQueue

SUBJECT = "events.recorded"
EVENTS = WorkQueue(name="EVENTS", subjects=("events.>",), max_age_setting="STREAM_MAX_AGE_SECONDS",
                   max_age_default=3600, noun="stream")
SUMMARIES = PullConsumer(durable="summaries", subject=SUBJECT, settings_prefix="PROCESSOR",
                         batch_default=20, read_failure="cannot read the event stream",
                         handle_failure="event not stored", failure_dependency="postgres", failure_operation="record")
