"""The reporting commands as a user runs them: exit codes, files written, one-line errors."""

import importlib.util
import subprocess
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "report_records", Path(__file__).parents[2] / "unit" / "report" / "report_records.py")
report_records = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_records)


def sregym(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sregym", *args], capture_output=True, text=True, timeout=300)


def test_report_and_leaderboard_commands_write_their_files(tmp_path):
    results = report_records.write_records(report_records.synthetic_suite(problems=3), tmp_path / "results")
    rep = sregym("report", str(results), "--resamples", "200")
    assert rep.returncode == 0, rep.stderr
    assert (results / "report" / "report.md").is_file() and (results / "report" / "metrics.json").is_file()
    assert "oracle" in rep.stdout and f"report: {results / 'report' / 'report.md'}" in rep.stdout
    site = sregym("leaderboard", "build", str(results), "--out", str(tmp_path / "site"), "--resamples", "200")
    assert site.returncode == 0, site.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_directory_without_records_exits_2_with_one_line(tmp_path):
    proc = sregym("report", str(tmp_path))
    assert proc.returncode == 2
    assert "no run records found" in proc.stderr and "Traceback" not in proc.stderr


def test_an_unknown_suite_exits_2_naming_it(tmp_path):
    proc = sregym("suite", "run", "--suite", "no_such_suite", "--agent", "noop", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "no_such_suite" in proc.stderr and "Traceback" not in proc.stderr
