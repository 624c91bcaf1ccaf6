"""benchmarks/suite_throughput.py --from-runs: cells per hour from two suite runs' records (one run at
1 concurrent cell, one at 2), counting the time at least one cell was running."""

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[3] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as when run as a script: its folder is on the import path
import suite_throughput as throughput  # noqa: E402

T0 = datetime(2026, 11, 27, 14, 0, tzinfo=timezone.utc)


def span(start: float, end: float) -> tuple[datetime, datetime]:
    return T0 + timedelta(seconds=start), T0 + timedelta(seconds=end)


def test_busy_time_is_the_union_of_the_cells_intervals():
    # two overlapping cells, a gap (a resumed run's pause), one more cell
    assert throughput.busy_seconds([span(0, 100), span(50, 120), span(300, 400)]) == pytest.approx(220)
    # one after another: the sum; nested: the outer one
    assert throughput.busy_seconds([span(0, 10), span(10, 30)]) == pytest.approx(30)
    assert throughput.busy_seconds([span(0, 100), span(20, 30)]) == pytest.approx(100)
    assert throughput.busy_seconds([]) == 0


def test_the_rate_counts_completed_cells_over_the_busy_time_of_every_record():
    # an aborted run of a cell (then resumed) cost time and finished nothing
    records = [("completed", *span(0, 100)), ("completed", *span(50, 150)), ("aborted", *span(200, 230)),
               ("completed", *span(240, 300))]
    rate = throughput.rate_of(records)
    assert rate.done == 3 and rate.busy == pytest.approx(240)
    assert rate.per_hour == pytest.approx(3 / 240 * 3600)


def test_a_record_without_an_end_is_refused_by_name():
    with pytest.raises(ValueError, match="no end time"):
        throughput.rate_of([("error", T0, None)])
