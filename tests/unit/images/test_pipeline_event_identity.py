"""event-pipeline stores an event once per event id: the one ingest gives it, which a redelivery
repeats and a recreated stream (whose sequence numbers start again at 1) does not."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("pipeline_schema",
                                               ROOT / "charts/event-pipeline/images/pipeline/pipeline/schema.py")
schema = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(schema)

EVENT = {"user": "u", "kind": "view", "value": 1.0}
STORED_AT = "2026-11-27T02:00:00+00:00"


def test_the_id_ingest_put_in_the_event_names_it_whatever_its_place_in_the_stream():
    first = schema.event_id({**EVENT, "id": "e-1"}, {}, 7, STORED_AT)
    redelivered = schema.event_id({**EVENT, "id": "e-1"}, {}, 7, STORED_AT)
    assert first == redelivered == "e-1"
    # after the queue pod is recreated a new event gets an old sequence number: still a new id
    assert schema.event_id({**EVENT, "id": "e-2"}, {}, 7, "2026-11-27T03:00:00+00:00") != first


def test_the_message_id_header_names_an_event_that_carries_no_id():
    assert schema.event_id(EVENT, {schema.MSG_ID_HEADER: "m-1"}, 3, STORED_AT) == "m-1"
    assert schema.event_id({**EVENT, "id": "e-1"}, {schema.MSG_ID_HEADER: "m-1"}, 3, STORED_AT) == "e-1"


def test_a_message_without_any_id_is_named_by_its_place_in_this_stream():
    """A redelivery of it is the same event; the same sequence number in a recreated stream (stored
    at another time) is not."""
    once = schema.event_id(EVENT, None, 3, STORED_AT)
    assert once == schema.event_id(EVENT, {}, 3, STORED_AT)
    assert once != schema.event_id(EVENT, None, 3, "2026-11-27T02:05:00+00:00")
    assert once != schema.event_id(EVENT, None, 4, STORED_AT)


def test_the_database_deduplicates_on_the_event_id_not_the_stream_sequence():
    sql = " ".join(schema.SCHEMA.split())
    assert "event_id TEXT NOT NULL UNIQUE" in sql and "CREATE UNIQUE INDEX IF NOT EXISTS events_event_id_key" in sql
    # a database made by the first schema loses its unique stream_seq (else the bug stays on it)
    assert "DROP CONSTRAINT IF EXISTS events_stream_seq_key" in sql and "stream_seq BIGINT UNIQUE" not in sql
