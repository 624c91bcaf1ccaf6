"""validate's "mitigation oracle passes after recovery" step: a fix needs seconds to reach the users
(seen in CI: hotel_geo_selector_mismatch's first request right after the selector was restored timed
out), so a failing grade is taken again until RECOVERY_SETTLE_S after the recovery, and the step
says when it first passed; an oracle that never passes in that time still fails the step."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

from sregym.conductor import validate


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, s: float) -> None:
        self.now += s


def steps_with(grades: list[tuple[bool, str]], clock: Clock, grade_seconds: float = 10.0):
    s = validate._Steps.__new__(validate._Steps)
    taken: list[float] = []

    async def mitigation():
        taken.append(clock.now)
        clock.now += grade_seconds
        return grades.pop(0) if len(grades) > 1 else grades[0]

    s.mitigation = mitigation
    return s, taken


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(validate.time, "monotonic", c.monotonic)
    monkeypatch.setattr(validate.anyio, "sleep", c.sleep)
    return c


def test_a_grade_that_passes_at_once_is_taken_once(clock):
    s, taken = steps_with([(True, "http_probe: pass 5/5")], clock)
    assert anyio.run(s.mitigation_after_recovery) == (True, "http_probe: pass 5/5")
    assert taken == [0.0]


def test_a_grade_that_fails_while_the_fix_propagates_passes_on_a_later_grade_and_says_so(clock):
    s, taken = steps_with([(False, "http_probe: FAIL 0/1 samples passed; first failure: TimeoutError"),
                           (True, "http_probe: pass 5/5")], clock)
    ok, detail = anyio.run(s.mitigation_after_recovery)
    assert ok and taken == [0.0, 15.0]
    assert detail.startswith("http_probe: pass 5/5; passed on grade 2, 25 s after recovery")
    assert "(the first: http_probe: FAIL 0/1 samples passed; first failure: TimeoutError)" in detail


def test_an_oracle_that_never_passes_after_recovery_fails_the_step_once_the_settle_time_is_over(clock):
    s, taken = steps_with([(False, "slo: FAIL error rate 40%")], clock)
    ok, detail = anyio.run(s.mitigation_after_recovery)
    assert not ok and "still failing on grade" in detail
    assert taken[-1] < validate.RECOVERY_SETTLE_S  # no grade starts after the settle time
    assert len(taken) == 4  # at 0, 15, 30 and 45 s (each grade 10 s, 5 s apart)
