"""What a JetStream work queue and its durable pull consumer are, as plain data with their settings.

An app declares its stream and consumer once; ``svckit.jetstream`` connects, creates the stream and
runs the consumer from these. Nothing here touches NATS, so the settings can be checked anywhere."""

from __future__ import annotations

from dataclasses import dataclass

from svckit import config

ERROR = "error"  # the outcome of a message that will be delivered again


@dataclass(frozen=True)
class WorkQueue:
    """A work-queue stream: a message leaves it once one consumer acknowledges it."""

    name: str  # the JetStream stream, e.g. "ORDERS"
    subjects: tuple[str, ...]  # what it stores, e.g. ("orders.>",)
    max_age_setting: str  # the env var with the longest a message is kept, in seconds
    max_age_default: float
    noun: str  # how log lines name it: "<noun> connection error", "<noun> unreachable"

    def max_age(self) -> float:
        return config.number(self.max_age_setting, self.max_age_default)


@dataclass(frozen=True)
class PullConsumer:
    """A durable pull consumer of one subject, tuned by ``<settings_prefix>_BATCH``,
    ``<settings_prefix>_ACK_WAIT_SECONDS`` and ``<settings_prefix>_RETRY_DELAY_SECONDS``."""

    durable: str  # the consumer's name, also the label value of its metrics
    subject: str
    settings_prefix: str  # e.g. "WORKER"
    batch_default: int
    read_failure: str  # the log line when the stream cannot be read
    handle_failure: str  # the log line when one message fails and is delivered again later
    failure_dependency: str  # dependency_errors_total{dependency, operation} of a failed message
    failure_operation: str

    def batch(self) -> int:
        return config.integer(f"{self.settings_prefix}_BATCH", self.batch_default)

    def ack_wait(self) -> float:
        return config.number(f"{self.settings_prefix}_ACK_WAIT_SECONDS", 30)

    def retry_delay(self) -> float:
        return config.number(f"{self.settings_prefix}_RETRY_DELAY_SECONDS", 2.0)


def message_age(enqueued_at: float, now: float) -> float:
    """Seconds from enqueue to now; never negative when the clocks of server and pod disagree."""
    return max(0.0, now - enqueued_at)


def counts_towards_age(outcome: str) -> bool:
    """Only a message that left the queue has an end-to-end age; an errored one comes back."""
    return outcome != ERROR
