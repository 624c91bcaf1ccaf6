"""What the pipeline answers (:mod:`svckit.answers`): an accepted event's id and stream position,
the summary of the user asked about."""

from __future__ import annotations

from svckit.answers import json_object


def accepted(_status: int, body: bytes) -> str | None:
    ack = json_object(body)
    return None if ack["id"] and isinstance(ack["seq"], int) else "no event id or stream position"


def summary_of(user: str):
    def check(_status: int, body: bytes) -> str | None:
        summary = json_object(body)
        if summary["user"] != user:
            return f"the summary of {summary['user']!r}, not {user}"
        return None if isinstance(summary["events"], int) else "no event count"
    return check
