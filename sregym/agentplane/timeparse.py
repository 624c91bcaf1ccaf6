"""Times as agents write them: ``now``, ``now-15m``, ``15m`` (ago), unix seconds, or RFC 3339."""

from __future__ import annotations

import time
from datetime import datetime

from sregym.core.durations import DURATION, TimeFormatError, parse_duration

__all__ = ["TimeFormatError", "parse_duration", "parse_time"]


def parse_time(text: str | float | int | None, *, default: float | None = None, now: float | None = None) -> float:
    """Unix seconds for ``text``. ``None`` gives ``default`` (or now)."""
    now = time.time() if now is None else now
    if text is None or text == "":
        return now if default is None else default
    if isinstance(text, (int, float)):
        return float(text)
    s = text.strip()
    if s == "now":
        return now
    if s.startswith("now-"):
        return now - parse_duration(s[4:])
    if DURATION.match(s):
        return now - parse_duration(s)
    try:
        return float(s)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise TimeFormatError(
            f"cannot read time {text!r}; write now, now-15m, 15m (ago), unix seconds or RFC 3339") from None
