""".ci/run tells the truth about its tests stage: run in a copy of the project whose install,
cluster and image stages are stubs, on throwaway tests, it fails for a failing test, for a skip
(CI has every prerequisite), for a tier that selects nothing (pytest exit 5) and for a tests stage
that reaches its time limit, and it ends with each stage's time and the tests' closing lines."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]


def readme_commands() -> list[str]:
    """The README's opening commands: the first bash block, comments left out."""
    block = (ROOT / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_ci_runs_the_readme_test_command_which_needs_no_sudo():
    setup, tests = readme_commands()
    assert "sudo" not in setup + tests  # a root shell has no sudo on our machines
    assert tests.startswith("python3 -m pytest -m ci ") and "R" in tests.split("-r", 1)[1].split()[0]
    assert f"{tests} 2>&1" in (ROOT / ".ci" / "run").read_text()


@pytest.fixture
def ci(tmp_path):
    """(repository copy, run(**env) -> CompletedProcess) with stub install, sregym and lint-imports."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    (repo / "tests" / "unit").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    shutil.copy(ROOT / "pyproject.toml", repo)
    shutil.copy(ROOT / "tests" / "conftest.py", repo / "tests")
    (repo / "scripts" / "install.sh").write_text("echo installed\n")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name in ("sregym", "lint-imports"):
        (stubs / name).write_text(f'#!/bin/sh\necho "{name} $*"\n')
        (stubs / name).chmod(stat.S_IRWXU)

    def run(**env: str) -> subprocess.CompletedProcess:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SREGYM_")}
        return subprocess.run(["bash", str(repo / ".ci" / "run")], capture_output=True, text=True, timeout=120,
                              env={**clean, "PATH": f"{stubs}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
                                   "SREGYM_TEST_TIMINGS": str(tmp_path / "timings"), **env})

    return repo, run


def write_test(repo: Path, name: str, text: str) -> None:
    (repo / "tests" / "unit" / name).write_text(text)


def test_a_passing_tier_passes_and_ends_with_stage_times_and_the_closing_lines(ci):
    repo, run = ci
    write_test(repo, "test_ok.py", "def test_ok(): pass\n")
    proc = run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tail = proc.stdout.splitlines()[-10:]
    assert tail[-1] == "==> CI: PASS", tail
    assert any(line.startswith("RESULT   PASS: 1 passed, 0 failed, 0 skipped") for line in tail), tail
    assert any(line.strip().startswith("tests") and "rc=0" in line for line in tail), tail
    assert any(line.strip().startswith("cluster down") for line in tail), tail


FAILING_TIERS = {
    "a failing test": ("def test_bad():\n    assert False\n", "FAILED   tests/unit/test_x.py::test_bad",
                       "==> CI: FAIL: tests failed (pytest exit 1)"),
    "a skip": ("import pytest\n\ndef test_x():\n    pytest.skip('helm is not installed')\n",
               "SKIPPED  tests/unit/test_x.py::test_x: Skipped: helm is not installed",
               "==> CI: FAIL: 1 tests skipped (SKIPPED below): CI has every prerequisite, so each is a test that did "
               "not run"),
    "a tier that selects nothing": ("import pytest\n\n@pytest.mark.long\ndef test_x(): pass\n", "RESULT   FAIL: 0 passed",
                                    "==> CI: FAIL: no tests ran (pytest exit 5): the ci tier selected nothing"),
}


@pytest.mark.parametrize("case", FAILING_TIERS)
def test_ci_fails_for_what_it_names_at_the_end(ci, case):
    repo, run = ci
    source, named, verdict = FAILING_TIERS[case]
    write_test(repo, "test_x.py", source)
    proc = run()
    assert proc.returncode == 1, proc.stdout
    tail = proc.stdout.splitlines()[-8:]
    assert any(line.startswith(named) for line in tail), tail
    assert tail[-1] == verdict, tail


def test_a_tests_stage_over_its_limit_is_cut_and_named(ci):
    repo, run = ci
    write_test(repo, "test_a_slow.py", "import time\n\ndef test_slow():\n    time.sleep(90)\n")
    write_test(repo, "test_b_later.py", "def test_later(): pass\n")
    # 25 s for the tests stage (300 s are kept for the teardown): enough for pytest to start and
    # reach test_slow on a loaded machine. With 5 s, CI's Ctrl-C once came while pytest was still
    # importing (a KeyboardInterrupt traceback, no test running to name as CUT).
    proc = run(SREGYM_CI_SECONDS="325")
    assert proc.returncode == 1, proc.stdout
    tail = proc.stdout.splitlines()[-12:]
    assert "CUT      tests/unit/test_a_slow.py::test_slow: running when the run was interrupted" in tail, tail
    assert "NOT RUN  tests/unit/test_b_later.py (1 test)" in tail, tail
    assert tail[-1].startswith("==> CI: FAIL: the tests stage reached its limit of"), tail


def test_a_known_open_gap_keeps_ci_green_and_is_named_at_the_end(ci):
    repo, run = ci
    write_test(repo, "test_gap.py", "import pytest\n\n@pytest.mark.xfail(strict=True, reason='open: measured')\n"
                                    "def test_gap():\n    assert False\n")
    proc = run()
    assert proc.returncode == 0, proc.stdout
    tail = proc.stdout.splitlines()[-8:]
    assert any(line.startswith("KNOWN OPEN tests/unit/test_gap.py::test_gap: open: measured") for line in tail), tail
    assert tail[-1] == "==> CI: PASS", tail


def test_the_timings_file_names_slow_fixtures_besides_every_call(ci, tmp_path):
    """Where CI's time goes: every call, and the setups that take a second or more (a module's app
    deploy), not the instant ones."""
    repo, run = ci
    write_test(repo, "test_timed.py", "import time, pytest\n"
               "@pytest.fixture(scope='module')\ndef deployed():\n    time.sleep(1.2)\n    yield\n"
               "def test_slow_setup(deployed): pass\n"
               "def test_quick(): pass\n")
    proc = run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in (tmp_path / "timings").read_text().splitlines()]
    assert {(r[1], r[3].split("::")[-1]) for r in rows} == {("setup", "test_slow_setup"), ("call", "test_slow_setup"),
                                                            ("call", "test_quick")}, rows
