"""benchmarks/suite_overhead.py: framework time is wall time less the agent, with median and p95."""

import importlib.util
import sys
from pathlib import Path

import pytest
from report_records import make_record, write_records

BENCHMARKS = Path(__file__).parents[3] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as when run as a script: its folder is on the import path
_spec = importlib.util.spec_from_file_location("suite_overhead", BENCHMARKS / "suite_overhead.py")
overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(overhead)


def test_framework_time_is_the_run_less_the_agent_phase():
    rec = make_record(phases={"prepare": 20, "baseline": 30, "agent": 100, "grade": 40, "recover": 10})
    assert overhead.framework_seconds(rec) == pytest.approx(100)
    assert overhead.framework_seconds(make_record()) is None


def test_quantiles_interpolate_like_numpy():
    assert overhead.quantile([1, 2, 3, 4], 0.5) == 2.5
    assert overhead.quantile(list(range(101)), 0.95) == pytest.approx(95)


def test_the_script_prints_median_and_p95(tmp_path, capsys):
    recs = [make_record(problem=f"p{i}", seed=i, phases={"prepare": 5.0 * i, "agent": 50.0}) for i in range(1, 6)]
    recs.append(make_record(problem="px", seed=9, status="error", phases={"prepare": 999.0}))
    write_records(recs, tmp_path)
    assert overhead.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "runs: 5" in out
    assert "median 15.0 s, p95 24.0 s" in out
    assert "median 98.6 s -> 15.0 s (6.6x), p95 169 s -> 24.0 s (7.0x)" in out
    assert "meets" in out and out.splitlines()[-1] == "verdict: meets every target"


def test_the_script_fails_when_the_median_misses_the_target_or_there_is_nothing_to_measure(tmp_path, capsys):
    write_records([make_record(problem=f"p{i}", seed=i, phases={"prepare": 31.0, "agent": 5.0}) for i in range(3)],
                  tmp_path / "slow")
    assert overhead.main([str(tmp_path / "slow")]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "verdict: MISSES median 31.0 s (target <= 30 s)"
    (tmp_path / "empty").mkdir()
    assert overhead.main([str(tmp_path / "empty")]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "verdict: MISSES no runs to measure"
