"""Shared by the benchmark scripts (run as ``python3 benchmarks/<name>.py``, so this folder is on
the import path)."""

from __future__ import annotations


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default), without numpy for a tiny script."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
