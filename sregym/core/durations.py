"""Durations as Prometheus, problem files and agents write them: ``90s``, ``15m``, ``2h``, ``1d``."""

from __future__ import annotations

import re

DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class TimeFormatError(ValueError):
    """A time or duration cannot be read."""


def parse_duration(text: str) -> float:
    """``90s``, ``15m``, ``2h``, ``1d`` -> seconds."""
    m = DURATION.match(text.strip())
    if not m:
        raise TimeFormatError(f"cannot read duration {text!r}; write e.g. 30s, 15m, 2h")
    return float(m.group(1)) * _UNITS[m.group(2)]
