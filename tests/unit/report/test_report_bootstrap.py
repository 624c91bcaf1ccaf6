"""The hierarchical bootstrap gives known intervals on known data, and the same ones every time."""

import math

import pytest

from sregym.report.bootstrap import ratio_estimate


def test_all_successes_give_the_interval_one_to_one():
    est = ratio_estimate([f"p{i % 4}" for i in range(12)], [1.0] * 12, seed=1)
    assert (est.value, est.lo, est.hi) == (1.0, 1.0, 1.0)
    assert est.n == 12 and est.problems == 4


def test_all_failures_give_the_interval_zero_to_zero():
    est = ratio_estimate(["a", "b"], [0.0, 0.0], seed=1)
    assert (est.value, est.lo, est.hi) == (0.0, 0.0, 0.0)


def test_one_problem_reduces_to_the_binomial_interval():
    # 30 successes in 100 runs of one problem: the normal approximation is 0.3 +- 1.96*sqrt(.3*.7/100)
    num = [1.0] * 30 + [0.0] * 70
    est = ratio_estimate(["only"] * 100, num, seed=7, resamples=4000)
    half = 1.96 * math.sqrt(0.3 * 0.7 / 100)
    assert est.value == pytest.approx(0.3)
    assert est.lo == pytest.approx(0.3 - half, abs=0.02)
    assert est.hi == pytest.approx(0.3 + half, abs=0.02)


def test_one_run_per_problem_resamples_problems_like_a_plain_bootstrap():
    num = [1.0] * 60 + [0.0] * 40
    est = ratio_estimate([f"p{i}" for i in range(100)], num, seed=3, resamples=4000)
    half = 1.96 * math.sqrt(0.6 * 0.4 / 100)
    assert est.lo == pytest.approx(0.6 - half, abs=0.02)
    assert est.hi == pytest.approx(0.6 + half, abs=0.02)


def test_problem_level_clustering_widens_the_interval():
    # 10 problems, 10 seeds each; each problem always passes or always fails: the effective
    # sample is 10 problems, not 100 runs, so the interval must be about sqrt(10) times wider.
    problems = [f"p{i // 10}" for i in range(100)]
    clustered = [1.0 if i // 10 < 5 else 0.0 for i in range(100)]
    independent = [1.0 if i % 2 else 0.0 for i in range(100)]
    wide = ratio_estimate(problems, clustered, seed=5)
    narrow = ratio_estimate(problems, independent, seed=5)
    assert (wide.hi - wide.lo) > 2.5 * (narrow.hi - narrow.lo)


def test_the_same_seed_gives_the_same_interval_and_another_seed_a_close_one():
    problems = [f"p{i % 7}" for i in range(40)]
    num = [float(i % 3 == 0) for i in range(40)]
    a = ratio_estimate(problems, num, seed=11)
    b = ratio_estimate(problems, num, seed=11)
    c = ratio_estimate(problems, num, seed=12)
    assert a == b
    assert a.value == c.value
    assert abs(a.lo - c.lo) < 0.05 and abs(a.hi - c.hi) < 0.05


def test_a_pooled_ratio_weighs_runs_by_their_denominator():
    # 1 invalid of 10 actions and 3 of 30 pool to 4/40
    est = ratio_estimate(["a", "b"], [1.0, 3.0], [10.0, 30.0], seed=0)
    assert est.value == pytest.approx(0.1)


def test_no_runs_means_no_estimate():
    est = ratio_estimate([], [], seed=0)
    assert est.value is None and est.lo is None and est.n == 0
