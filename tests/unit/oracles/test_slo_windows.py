"""The slo oracle's windows: short by construction, yet a blip neither fails a fixed system nor
passes a broken one, and a fault's wake after its fix fits in what the window may lose."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oracles.slo import SloParams, disturbed_samples, lag_of, sample_interval, tolerated_samples
from sregym.core.loader import load_problem_file
from sregym.core.promql import scrape_interval_seconds
from sregym.oracles import max_samples

ROOT = Path(__file__).parents[3]
PROBLEMS = ROOT / "problems"
BLIP_SECONDS = 2.0  # the brief stalls, restarts and failed requests noise and clusters make
# After a fix, requests sent before it still end (or time out) up to the load generator's timeout
# later, and the app takes a few seconds to settle: measured on hotel_geo_cpu_pressure, 10 samples
# at 2 s failed after recovery with a 10 s rate (12 s lag + 5 s timeout + ~3 s).
SETTLE_SECONDS = 8.0


def loadgen_timeout() -> float:
    """The longest client timeout of the apps' load generators (a request is counted when it ends)."""
    return max(float(yaml.safe_load(v.read_text())["loadgen"]["timeoutSeconds"])
               for v in (ROOT / "charts").glob("*/values.yaml") if "loadgen" in yaml.safe_load(v.read_text()))


def slo_params(path: Path) -> list[SloParams]:
    problem = load_problem_file(path).problem
    return [SloParams.model_validate(ref.params) for ref in problem.oracles.mitigation if ref.name == "slo"]


SLO_PROBLEMS = sorted(p for p in PROBLEMS.glob("*.yaml") if slo_params(p))


def test_samples_at_every_scrape_and_lags_one_rate_window_and_one_scrape():
    p = SloParams(rate_window="10s")
    assert sample_interval(p) == scrape_interval_seconds() == 2.0
    assert lag_of(p) == 12.0
    assert sample_interval(SloParams(interval_seconds=5)) == 5.0


def test_a_disturbance_reaches_the_samples_whose_rate_window_overlaps_it():
    p = SloParams(rate_window="10s", window_seconds=40, min_pass_fraction=0.5)
    # samples every 2 s; a 2 s blip is seen from its start until 12 s after its end: 14 s, 8 samples
    assert disturbed_samples(p, 2.0) == 8
    assert disturbed_samples(p, 0.0) == 7  # the wake of a fault fixed at t=0
    # 22 samples at most (start, every 2 s, end), 11 may fail
    assert tolerated_samples(p, 40) == 11
    assert tolerated_samples(SloParams(min_pass_fraction=1.0), 40) == 0


@pytest.mark.parametrize("path", SLO_PROBLEMS, ids=lambda p: p.stem)
def test_slo_problem_window_absorbs_a_blip_and_the_wake_of_the_fix_both_ways(path):
    for p in slo_params(path):
        window = p.window_seconds
        assert window is not None, f"{path.name}: an slo oracle graded over a rate window sets window_seconds"
        tolerated = tolerated_samples(p, window)
        blip = disturbed_samples(p, BLIP_SECONDS)
        # a fixed system: a blip, or the fault's wake in the rate window after the fix, fails too
        # few samples to fail the window
        assert blip <= tolerated, f"{path.name}: a {BLIP_SECONDS:.0f} s blip fails {blip} samples, {tolerated} may"
        wake = disturbed_samples(p, loadgen_timeout() + SETTLE_SECONDS)
        assert wake <= tolerated, f"{path.name}: the wake of a fix fails {wake} samples, {tolerated} may"
        # a broken system: a good blip passes too few samples to pass the window
        must_pass = max_samples(window, sample_interval(p)) - tolerated
        assert blip < must_pass, f"{path.name}: a good {BLIP_SECONDS:.0f} s blip passes {blip} samples, {must_pass} must"


def removed_triggers(path: Path) -> list[tuple[float, float]]:
    """(start, end) of each trigger that is removed during the run: a metastable failure's spark."""
    problem = load_problem_file(path).problem
    return [(f.at, f.at + f.duration) for f in problem.faults if f.role == "trigger" and f.duration]


METASTABLE = [p for p in SLO_PROBLEMS if removed_triggers(p)]


def test_the_metastable_problems_are_found():
    assert {p.stem for p in METASTABLE} >= {"hotel_retry_storm_after_db_stall",
                                            "hotel_retry_storm_after_search_stall",
                                            "shop_retry_storm_after_cpu_spike"}


@pytest.mark.parametrize("path", METASTABLE, ids=lambda p: p.stem)
def test_a_metastable_window_fails_only_if_the_failure_outlives_its_trigger(path):
    """Graded from the last fault's start plus the rate lag at the earliest (as validation does),
    a window must not fail on the trigger alone: the trigger, the requests it held up to the load
    generator's timeout and the settling after it fail too few samples, so only a failure that
    persists after its trigger is removed fails the window."""
    for p in slo_params(path):
        start = max(at for at, _ in removed_triggers(path)) + lag_of(p)
        spark_end = max(end for _, end in removed_triggers(path)) + loadgen_timeout() + SETTLE_SECONDS
        spark = disturbed_samples(p, max(0.0, spark_end - start))
        tolerated = tolerated_samples(p, p.window_seconds)
        assert spark <= tolerated, (f"{path.name}: the trigger alone fails {spark} samples of a "
                                    f"{p.window_seconds:.0f} s window, {tolerated} may: a failing window "
                                    f"would not show the failure outlived its trigger")
