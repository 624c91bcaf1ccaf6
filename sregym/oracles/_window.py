"""Checks that must hold over a window, not once.

A mitigation that only looks right at one instant (pods Running right after a restart, a value
patched back just before grading and about to be reverted) must not pass. A windowed oracle
samples its probe every ``interval_seconds`` from the start to the end of the window and passes
only if enough samples pass (all, by default).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.core.errors import SregymError
from sregym.core.record import CheckResult


class WindowParams(BaseModel):
    """Parameters every windowed oracle accepts."""

    model_config = ConfigDict(extra="forbid")

    window_seconds: float | None = Field(None, ge=0, description="default: the run's grading window")
    interval_seconds: float = Field(5.0, gt=0, description="time between samples")
    min_pass_fraction: float = Field(1.0, gt=0, le=1, description="share of samples that must pass")


@dataclass
class Sample:
    t: float
    passed: bool
    detail: dict[str, Any] = field(default_factory=dict)


Probe = Callable[[], tuple[bool, dict[str, Any]]]

# Set when the grade an oracle is part of is already lost (``grading.grade_mitigation`` with
# ``stop_when_lost``): its window can change nothing, so :func:`sample_window` returns at once.
_STOP: ContextVar[threading.Event | None] = ContextVar("sregym_window_stop", default=None)


@contextlib.contextmanager
def stops_on(event: threading.Event) -> Iterator[None]:
    """Within this block (in this thread), every :func:`sample_window` ends early once ``event``
    is set; the caller must then not take the oracle's verdict as its own (see ``stopped``)."""
    token = _STOP.set(event)
    try:
        yield
    finally:
        _STOP.reset(token)


def sample_window(probe: Probe, window_s: float, interval_s: float, *, min_pass_fraction: float | None = None,
                  clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep
                  ) -> list[Sample]:
    """Call ``probe`` at the start, every ``interval_s``, and once at the end of the window.

    With ``min_pass_fraction`` (what :func:`window_result` will be given), sampling stops as soon
    as so many samples failed that the window can no longer pass, however the rest would go (at
    most ``max_samples`` are taken): the verdict is the same, reached without waiting out a window
    that is already lost. A window that may still pass is always sampled to its end.

    Inside :func:`stops_on`, sampling also ends as soon as its event is set.

    A probe that raises a ``SregymError`` (cluster unreachable, object gone) is a failed sample
    with the message as detail; other exceptions are bugs and propagate.
    """
    most = max_samples(window_s, interval_s)
    stop = _STOP.get()
    if stop is not None and sleep is time.sleep:
        sleep = stop.wait  # type: ignore[assignment]  # wakes at once when the grade is lost
    start = clock()
    samples: list[Sample] = []
    while True:
        t = clock() - start
        try:
            ok, detail = probe()
        except SregymError as e:
            ok, detail = False, {"error": e.message}
        samples.append(Sample(round(t, 2), ok, detail))
        if min_pass_fraction is not None and lost(samples, min_pass_fraction, most):
            return samples
        elapsed = clock() - start
        if elapsed >= window_s or (stop is not None and stop.is_set()):
            return samples
        sleep(min(interval_s, window_s - elapsed))


def grade_lost() -> bool:
    """Whether the grade this oracle is part of is already lost (inside :func:`stops_on`): an
    oracle with a sampling loop of its own ends it then, as :func:`sample_window` does."""
    stop = _STOP.get()
    return stop is not None and stop.is_set()


def max_samples(window_s: float, interval_s: float) -> int:
    """The most samples :func:`sample_window` takes: one at the start, one after each full
    interval inside the window, and one at its end."""
    return math.floor(window_s / interval_s) + 2


def lost(samples: list[Sample], min_pass_fraction: float, most: int) -> bool:
    """Whether the failed samples alone keep the window from passing, for any number of samples
    up to ``most`` (passing needs failed <= (1 - fraction) * n, and n <= most)."""
    failed = sum(not s.passed for s in samples)
    return failed > (1 - min_pass_fraction) * most + 1e-9


def window_result(name: str, samples: list[Sample], min_pass_fraction: float = 1.0, *,
                  summary: str = "", evidence: dict[str, Any] | None = None) -> CheckResult:
    """Pass when at least ``min_pass_fraction`` of the samples passed; evidence keeps the first
    and last sample details and every failing one (up to five)."""
    passed_n = sum(s.passed for s in samples)
    ok = bool(samples) and passed_n >= min_pass_fraction * len(samples) - 1e-9
    failing = [{"t": s.t, **s.detail} for s in samples if not s.passed][:5]
    ev: dict[str, Any] = {"samples": len(samples), "passed_samples": passed_n,
                          "window_s": samples[-1].t if samples else 0.0, "failing": failing}
    if samples:
        ev["last"] = samples[-1].detail
    ev.update(evidence or {})
    msg = summary or (f"{passed_n}/{len(samples)} samples passed" + ("" if ok else f"; first failure: "
                                                                    f"{_brief(failing[0]) if failing else '-'}"))
    return CheckResult(name=name, passed=ok, evidence=ev, message=msg)


def _brief(detail: dict[str, Any]) -> str:
    reason = detail.get("reason") or detail.get("error")
    return str(reason) if reason else ", ".join(f"{k}={v}" for k, v in detail.items() if k != "t")[:200]


def window_of(params: WindowParams, ctx_window: float) -> float:
    """The window an oracle watches: its own param, else the run's grading window."""
    return params.window_seconds if params.window_seconds is not None else ctx_window
