"""The tables: every event, and one running summary per user."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
  id BIGSERIAL PRIMARY KEY, stream_seq BIGINT UNIQUE NOT NULL, username TEXT NOT NULL, kind TEXT NOT NULL,
  value DOUBLE PRECISION NOT NULL, recorded_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS user_summary (
  username TEXT PRIMARY KEY, events BIGINT NOT NULL DEFAULT 0, purchases BIGINT NOT NULL DEFAULT 0,
  total_value DOUBLE PRECISION NOT NULL DEFAULT 0, last_event_at TIMESTAMPTZ);
"""


async def setup(conn) -> None:
    await conn.execute(SCHEMA)


def cache_key(user: str) -> str:
    return f"summary:{user}"
