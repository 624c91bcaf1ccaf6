"""tests/conftest.py reports the truth: run on throwaway tests under a copy of the project's pytest
setup, a failure is never reported as a skip (the old time budget once turned a failing test's
rerun into SKIPPED, exit 0), every rerun is shown, a test that passed only on its rerun is named
FLAKY, ``long`` is a tier of its own, a ci-tier test over its time fails the run by name, and an
interrupted run names the test it cut and the files it did not reach."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_ci_run import readme_commands

ROOT = Path(__file__).parents[3]
README_COMMAND = readme_commands()[1].split()[3:]  # after "python3 -m pytest"


def project(tmp_path: Path, tests: dict[str, str]) -> Path:
    """A folder with the project's pytest configuration, conftest and the given test files."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "tests")
    for name, text in tests.items():
        path = tmp_path / "tests" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def environment(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SREGYM_")}
    return {**env, "PYTHONPATH": str(ROOT), **more}


def pytest_in(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=folder,
                          env=environment(**env), capture_output=True, text=True, timeout=120)


def closing(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if " closing lines " in line)
    return lines[start + 1:]


FAILS_SLOWLY = """
import time

def test_breaks():
    time.sleep(2)
    assert False, "a real failure"
"""

FAILS_ONCE = """
from pathlib import Path

def test_wobbles(tmp_path_factory):
    mark = Path(__file__).with_suffix(".failed-once")
    if not mark.exists():
        mark.write_text("")
        assert False, "first attempt"
"""


def test_a_failing_test_is_failed_even_with_the_old_time_budget_spent(tmp_path):
    folder = project(tmp_path, {"integration/test_breaks.py": FAILS_SLOWLY})
    proc = pytest_in(folder, *README_COMMAND, SREGYM_TEST_BUDGET_SECONDS="1")
    assert proc.returncode == 1, proc.stdout
    assert "SKIPPED" not in proc.stdout and "skipped" not in proc.stdout.splitlines()[-1], proc.stdout
    assert "RERUN tests/integration/test_breaks.py::test_breaks" in proc.stdout  # -rR shows the attempt
    assert "RESULT   FAIL: 0 passed, 1 failed, 0 skipped, 0 known open, 1 rerun" in closing(proc.stdout)[-2], proc.stdout


def test_a_test_that_passed_only_on_its_rerun_is_named_flaky_in_the_closing_lines(tmp_path):
    folder = project(tmp_path, {"integration/test_wobbles.py": FAILS_ONCE, "unit/test_steady.py": "def test_ok(): pass"})
    proc = pytest_in(folder, *README_COMMAND)
    assert proc.returncode == 0, proc.stdout
    lines = closing(proc.stdout)
    assert "FLAKY    tests/integration/test_wobbles.py::test_wobbles: passed only on its rerun" in lines, lines
    # the first attempt's failure is named: it is what tells a flaky test's cause
    [rerun] = [line for line in lines if line.startswith("RERUN")]
    assert "then passed; first failure: AssertionError: first attempt" in rerun, rerun
    assert lines[-2].startswith("RESULT   PASS: 2 passed, 0 failed, 0 skipped, 0 known open, 1 rerun, 1 flaky"), lines


def test_without_the_rerun_plugin_an_integration_test_simply_fails(tmp_path):
    folder = project(tmp_path, {"integration/test_wobbles.py": FAILS_ONCE})
    proc = pytest_in(folder, *README_COMMAND, "-p", "no:rerunfailures")
    assert proc.returncode == 1 and "RERUN" not in proc.stdout, proc.stdout + proc.stderr


def test_a_failing_unit_test_gets_no_rerun(tmp_path):
    folder = project(tmp_path, {"unit/test_wobbles.py": FAILS_ONCE})
    proc = pytest_in(folder, *README_COMMAND)
    assert proc.returncode == 1 and "RERUN" not in proc.stdout, proc.stdout


def test_long_tests_are_a_tier_of_their_own_and_a_misspelt_marker_is_an_error(tmp_path):
    folder = project(tmp_path, {"unit/test_tiers.py": """
import pytest

def test_quick(): pass

@pytest.mark.long
def test_slow(): pass
"""})
    ci = pytest_in(folder, "-m", "ci", "-v")
    assert ci.returncode == 0 and "test_quick PASSED" in ci.stdout and "test_slow" not in ci.stdout, ci.stdout
    long = pytest_in(folder, "-m", "long", "-v")
    assert long.returncode == 0 and "test_slow PASSED" in long.stdout and "test_quick" not in long.stdout, long.stdout
    (folder / "tests" / "unit" / "test_typo.py").write_text("import pytest\n\n@pytest.mark.lnog\ndef test_x(): pass\n")
    typo = pytest_in(folder, "-m", "ci")
    assert typo.returncode != 0 and "'lnog' not found in `markers`" in typo.stdout + typo.stderr, typo.stdout


def test_no_tests_selected_is_a_failure(tmp_path):
    folder = project(tmp_path, {"unit/test_only_long.py": "import pytest\n\n@pytest.mark.long\ndef test_x(): pass\n"})
    proc = pytest_in(folder, *README_COMMAND)
    assert proc.returncode == 5, proc.stdout
    assert "RESULT   FAIL:" in closing(proc.stdout)[-2] and "no tests ran" in proc.stdout, proc.stdout


def test_a_ci_tier_test_over_its_time_fails_the_run_by_name_and_a_long_one_does_not(tmp_path):
    slow = "import time\n\ndef test_slow():\n    time.sleep(1.5)\n"
    folder = project(tmp_path, {"unit/test_slow.py": slow,
                                "unit/test_slow_long.py": "import pytest\n" + slow.replace("def ", "@pytest.mark.long\ndef ")})
    proc = pytest_in(folder, *README_COMMAND, SREGYM_CI_TEST_SECONDS="1")
    assert proc.returncode == 1, proc.stdout
    lines = closing(proc.stdout)
    assert any(line.startswith("TIERING  tests/unit/test_slow.py::test_slow: took 2s, over the ci tier's 1s")
               for line in lines), lines
    assert lines[-2].startswith("RESULT   FAIL: 1 passed, 0 failed, 0 skipped, 0 known open, 0 rerun, 0 flaky, 1 tiering")
    long = pytest_in(folder, "-m", "long", "-q", SREGYM_CI_TEST_SECONDS="1")
    assert long.returncode == 0 and "TIERING" not in long.stdout, long.stdout


def test_an_interrupted_run_names_the_test_it_cut_and_what_it_did_not_reach(tmp_path):
    started = tmp_path / "started"
    folder = project(tmp_path, {"unit/test_a_first.py": "def test_quick(): pass\n",
                                "unit/test_b_hangs.py": f"""
import pathlib, time

def test_hangs():
    pathlib.Path({str(started)!r}).write_text("")
    time.sleep(60)
""", "unit/test_c_later.py": "def test_one(): pass\n\ndef test_two(): pass\n"})
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *README_COMMAND], cwd=folder,
                            env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # what .ci/run sends when the tests stage reaches its limit
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    lines = closing(out)
    assert "CUT      tests/unit/test_b_hangs.py::test_hangs: running when the run was interrupted" in lines, lines
    assert "NOT RUN  tests/unit/test_c_later.py (2 tests)" in lines, lines
    assert not any("test_a_first" in line for line in lines), lines
    assert any(line.startswith("RESULT   FAIL: 1 passed, 0 failed, 0 skipped, 0 known open, 0 rerun, 0 flaky, 0 tiering, 2 not run")
               for line in lines), lines


KNOWN_GAP = """
import pytest

@pytest.mark.xfail(strict=True, reason="open: a restart cures the fault here")
def test_gap():
    assert False, "the gap, measured"
"""


def test_a_strict_xfail_is_named_known_open_with_its_reason_not_skipped(tmp_path):
    folder = project(tmp_path, {"unit/test_gap.py": KNOWN_GAP})
    proc = pytest_in(folder, *README_COMMAND)
    assert proc.returncode == 0, proc.stdout
    lines = closing(proc.stdout)
    assert any(line.startswith("KNOWN OPEN tests/unit/test_gap.py::test_gap: open: a restart cures the fault here")
               for line in lines), lines
    assert not any(line.startswith("SKIPPED") for line in lines), lines
    assert lines[-2].startswith("RESULT   PASS: 0 passed, 0 failed, 0 skipped, 1 known open"), lines


def test_a_known_gap_that_starts_passing_fails_the_run(tmp_path):
    folder = project(tmp_path, {"unit/test_gap.py": KNOWN_GAP.replace('assert False, "the gap, measured"', "pass")})
    proc = pytest_in(folder, *README_COMMAND)
    assert proc.returncode == 1, proc.stdout
    assert "FAILED   tests/unit/test_gap.py::test_gap" in closing(proc.stdout), proc.stdout


EXCUSED_AT_RUN_TIME = """
import pytest

def test_excused():
    passed = True  # what an oracle said while the fault persisted
    if passed:
        pytest.xfail("the oracle passes here, to be fixed")
    assert not passed

@pytest.mark.xfail(reason="not strict")
def test_loose_marker():
    assert False
"""


def test_a_failure_excused_while_the_test_runs_is_a_failure_not_known_open(tmp_path):
    """Only a strict xfail marker, visible before the test runs, is a gap on record: a ``pytest.xfail()``
    call behind a condition, or a non-strict marker, would turn a regression into 'known open'."""
    folder = project(tmp_path, {"unit/test_excused.py": EXCUSED_AT_RUN_TIME})
    proc = pytest_in(folder, *README_COMMAND)
    assert proc.returncode == 1, proc.stdout
    lines = closing(proc.stdout)
    assert "FAILED   tests/unit/test_excused.py::test_excused" in lines, lines
    assert "FAILED   tests/unit/test_excused.py::test_loose_marker" in lines, lines
    assert any(line.startswith("RESULT   FAIL: 0 passed, 2 failed, 0 skipped, 0 known open") for line in lines), lines
