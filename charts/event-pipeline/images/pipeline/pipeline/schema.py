"""The tables: every event, and one running summary per user; and what names an event."""

from __future__ import annotations

from collections.abc import Mapping

# An event is stored once per event_id, the id ingest gives it (a redelivery carries the same id).
# Not the stream sequence: the stream lives with the queue's pod and numbers again from 1 when it is
# recreated. The ALTERs bring a database made by the first schema (stream_seq UNIQUE NOT NULL,
# no event_id) to this one; on this one they change nothing.
SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
  id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL UNIQUE, stream_seq BIGINT, username TEXT NOT NULL,
  kind TEXT NOT NULL, value DOUBLE PRECISION NOT NULL, recorded_at TIMESTAMPTZ NOT NULL DEFAULT now());
ALTER TABLE events ADD COLUMN IF NOT EXISTS event_id TEXT;
UPDATE events SET event_id = 'legacy-seq-' || stream_seq WHERE event_id IS NULL;
ALTER TABLE events ALTER COLUMN event_id SET NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS events_event_id_key ON events (event_id);
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_stream_seq_key;
ALTER TABLE events ALTER COLUMN stream_seq DROP NOT NULL;
CREATE TABLE IF NOT EXISTS user_summary (
  username TEXT PRIMARY KEY, events BIGINT NOT NULL DEFAULT 0, purchases BIGINT NOT NULL DEFAULT 0,
  total_value DOUBLE PRECISION NOT NULL DEFAULT 0, last_event_at TIMESTAMPTZ);
"""

MSG_ID_HEADER = "Nats-Msg-Id"  # JetStream drops a publish whose id it saw within the duplicate window


async def setup(conn) -> None:
    await conn.execute(SCHEMA)  # one simple query: one transaction, so a concurrent start sees all or none


def cache_key(user: str) -> str:
    return f"summary:{user}"


def event_id(event: Mapping, headers: Mapping | None, stream_seq: int, stored_at: str) -> str:
    """The id an event is deduplicated on: the one ingest put in it (or on its message), else, for
    a message published without one, its place in this stream (sequence and the time JetStream
    stored it), which a redelivery repeats and a recreated stream does not."""
    given = event.get("id") or (headers or {}).get(MSG_ID_HEADER)
    if given:
        return str(given)
    return f"stream-{stream_seq}-{stored_at}"
