"""Times as agents write them: ``now``, ``now-15m``, ``15m`` (ago), unix seconds, or RFC 3339."""

from __future__ import annotations

import re
import time
from datetime import datetime

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


class TimeFormatError(ValueError):
    """A time or duration the agent wrote cannot be read."""


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``1d`` -> seconds."""
    m = _DURATION.match(text.strip())
    if not m:
        raise TimeFormatError(f"cannot read duration {text!r}; write e.g. 30s, 15m, 2h")
    return float(m.group(1)) * _UNITS[m.group(2)]


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
    if _DURATION.match(s):
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
