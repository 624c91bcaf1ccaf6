"""The service kit's work-queue declarations: the settings a consumer and its stream read, and the
two apps' queues (online-shop ORDERS, event-pipeline EVENTS) still read the env vars their charts set."""

import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "images/pyservice"))  # the kit imports itself as `svckit`, as in the image

from svckit import workqueue  # noqa: E402


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHOP = _load("shop_stores", ROOT / "charts/online-shop/images/shop/shop/stores.py")
PIPELINE = _load("pipeline_stream", ROOT / "charts/event-pipeline/images/pipeline/pipeline/stream.py")


def consumer(prefix="WORKER", batch_default=10):
    return workqueue.PullConsumer(durable="d", subject="s.x", settings_prefix=prefix, batch_default=batch_default,
                                  read_failure="r", handle_failure="h", failure_dependency="postgres",
                                  failure_operation="op")


def test_consumer_settings_default_when_unset(monkeypatch):
    for name in ("WORKER_BATCH", "WORKER_ACK_WAIT_SECONDS", "WORKER_RETRY_DELAY_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    c = consumer(batch_default=10)
    assert (c.batch(), c.ack_wait(), c.retry_delay()) == (10, 30.0, 2.0)


def test_consumer_settings_are_read_under_its_prefix(monkeypatch):
    monkeypatch.setenv("PROCESSOR_BATCH", "7")
    monkeypatch.setenv("PROCESSOR_ACK_WAIT_SECONDS", "12.5")
    monkeypatch.setenv("PROCESSOR_RETRY_DELAY_SECONDS", "0.5")
    monkeypatch.setenv("WORKER_BATCH", "99")  # another consumer's setting is not read
    c = consumer(prefix="PROCESSOR", batch_default=20)
    assert (c.batch(), c.ack_wait(), c.retry_delay()) == (7, 12.5, 0.5)


def test_a_malformed_setting_stops_the_process_with_its_name(monkeypatch, capsys):
    monkeypatch.setenv("WORKER_BATCH", "ten")
    with pytest.raises(SystemExit) as stop:
        consumer().batch()
    assert stop.value.code == 2
    assert "WORKER_BATCH" in capsys.readouterr().err


def test_stream_max_age_from_its_setting(monkeypatch):
    queue = workqueue.WorkQueue(name="Q", subjects=("q.>",), max_age_setting="Q_MAX_AGE", max_age_default=60,
                                noun="queue")
    monkeypatch.delenv("Q_MAX_AGE", raising=False)
    assert queue.max_age() == 60.0
    monkeypatch.setenv("Q_MAX_AGE", "5")
    assert queue.max_age() == 5.0


def test_message_age_is_never_negative_when_clocks_disagree():
    assert workqueue.message_age(enqueued_at=100.0, now=102.5) == 2.5
    assert workqueue.message_age(enqueued_at=105.0, now=102.5) == 0.0


def test_only_messages_that_left_the_queue_count_towards_age():
    assert workqueue.counts_towards_age("fulfilled")
    assert workqueue.counts_towards_age("duplicate")
    assert not workqueue.counts_towards_age(workqueue.ERROR)


def _chart_settings(app: str) -> dict:
    return yaml.safe_load((ROOT / f"charts/{app}/values.yaml").read_text())["settings"]


@pytest.mark.parametrize("app, queue, consumer_spec, expected", [
    ("online-shop", SHOP.ORDERS, SHOP.FULFILMENT,
     {"stream": "ORDERS", "subjects": ("orders.>",), "durable": "fulfilment", "subject": "orders.created",
      "read_failure": "cannot read the order queue", "handle_failure": "order failed", "operation": "fulfil",
      "noun": "queue"}),
    ("event-pipeline", PIPELINE.EVENTS, PIPELINE.SUMMARIES,
     {"stream": "EVENTS", "subjects": ("events.>",), "durable": "summaries", "subject": "events.recorded",
      "read_failure": "cannot read the event stream", "handle_failure": "event not stored", "operation": "record",
      "noun": "stream"}),
])
def test_each_app_keeps_its_stream_consumer_log_lines_and_chart_settings(monkeypatch, app, queue, consumer_spec,
                                                                          expected):
    assert (queue.name, queue.subjects, queue.noun) == (expected["stream"], expected["subjects"], expected["noun"])
    assert (consumer_spec.durable, consumer_spec.subject) == (expected["durable"], expected["subject"])
    assert consumer_spec.subject.startswith(queue.subjects[0].removesuffix(">"))
    assert (consumer_spec.read_failure, consumer_spec.handle_failure) == (expected["read_failure"],
                                                                          expected["handle_failure"])
    assert (consumer_spec.failure_dependency, consumer_spec.failure_operation) == ("postgres", expected["operation"])
    # every setting the kit reads for this app is one its chart sets, and the chart's value is what is read
    settings = _chart_settings(app)
    prefix = consumer_spec.settings_prefix
    for name in (queue.max_age_setting, f"{prefix}_BATCH", f"{prefix}_ACK_WAIT_SECONDS",
                 f"{prefix}_RETRY_DELAY_SECONDS"):
        assert name in settings, f"{app}'s chart does not set {name}"
        monkeypatch.setenv(name, str(settings[name]))
    assert consumer_spec.batch() == int(settings[f"{prefix}_BATCH"])
    assert queue.max_age() == float(settings[queue.max_age_setting])
