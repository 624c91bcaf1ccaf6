"""Times and durations as agents write them."""

from __future__ import annotations

import pytest

from sregym.agentplane.timeparse import TimeFormatError, parse_duration, parse_time

NOW = 1_700_000_000.0


@pytest.mark.parametrize("text, expected", [
    ("now", NOW), ("now-15m", NOW - 900), ("2h", NOW - 7200), ("90s", NOW - 90), ("1700000000", 1_700_000_000.0),
    ("2023-11-14T22:13:20Z", 1_700_000_000.0), ("2023-11-14T22:13:20+00:00", 1_700_000_000.0), (None, NOW),
])
def test_times_parse_relative_to_now(text, expected) -> None:
    assert parse_time(text, now=NOW) == pytest.approx(expected)


def test_default_is_used_for_missing_time() -> None:
    assert parse_time(None, default=5.0, now=NOW) == 5.0


def test_unreadable_time_and_duration_say_what_to_write() -> None:
    with pytest.raises(TimeFormatError, match="now-15m"):
        parse_time("yesterday", now=NOW)
    with pytest.raises(TimeFormatError, match="15m"):
        parse_duration("15 minutes")
    assert parse_duration("1d") == 86400
