"""Shared fixtures, the test tiers and the closing lines of every run (docs/testing.md).

``cluster`` brings the real local cluster up once per test session (or reuses a running one);
every integration test takes it. Set SREGYM_TEST_KUBECONFIG (and optionally SREGYM_TEST_CONTEXT)
to run the integration tests against an existing cluster.

Tiers: a test marked ``long`` is in the long tier; every other test is in the ``ci`` tier (marked
here), which CI runs whole: ``python3 -m pytest -m ci`` (the README's command), ``-m long`` for the
rest. Nothing is skipped for time. A ci-tier test slower than SREGYM_CI_TEST_SECONDS is a tiering
error that fails the run; a run cut short (CI interrupts its tests stage at its time limit) names
the test it cut and every test that did not run. Integration tests get one rerun; every rerun is
shown and a test that passed only on its rerun is named FLAKY in the closing lines.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from sregym.cluster.handle import ClusterHandle

# What one ci-tier test may take, setup and teardown included (one attempt; a rerun is another).
# Whole problems validated or run take about 100 s on the 2-core build machine, the slowest
# measured ci-tier test 269 s (an anti-gaming case: restart every pod under a LimitRange); 420 s
# leaves room for an app's first deploy (docs/testing.md).
CI_TEST_SECONDS = float(os.environ.get("SREGYM_CI_TEST_SECONDS", "420"))
CLOSING = "closing lines"  # the heading .ci/run prints from


@pytest.fixture(scope="session")
def cluster() -> ClusterHandle:
    if os.environ.get("SREGYM_TEST_KUBECONFIG"):
        from sregym.cluster.providers import ExistingCluster

        return ExistingCluster(Path(os.environ["SREGYM_TEST_KUBECONFIG"]), os.environ.get("SREGYM_TEST_CONTEXT")).up()
    if os.geteuid() != 0:
        pytest.skip("the local cluster needs root (set SREGYM_TEST_KUBECONFIG to use an existing cluster)")
    from sregym.cluster.local.provider import LocalCluster
    from sregym.cluster.providers import remember

    local = LocalCluster(os.environ.get("SREGYM_TEST_CLUSTER", "default"))
    local.paths.root.parent.mkdir(parents=True, exist_ok=True)
    # Several pytest processes (or a developer's shell) may ask at once: one brings it up.
    with open(local.paths.root.parent / f".{local.name}.up.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        handle = local.handle() if local.is_up() else local.up()
    remember(handle)
    return handle


# Whole-problem tests take minutes each: they run after everything quicker has reported.
WHOLE_PROBLEM = ("tests/integration/oracles/test_anti_gaming.py", "tests/integration/problems/",
                 "tests/integration/report/test_suite_on_cluster.py", "tests/integration/report/test_nightly_on_cluster.py",
                 "tests/integration/apps/test_app_misconfiguration.py")


def _rank(item) -> int:
    if item.get_closest_marker("lifecycle"):
        return 0  # they stop and restart the shared cluster: before everything else
    if item.nodeid.startswith("tests/unit/"):
        return 1
    if item.nodeid.startswith(WHOLE_PROBLEM[0]):
        return 4
    if item.nodeid.startswith(WHOLE_PROBLEM):
        return 3
    return 2


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker
def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: file order is kept inside each rank
    reruns = config.pluginmanager.hasplugin("rerunfailures")  # not with -p no:rerunfailures
    for item in items:
        if not item.get_closest_marker("long"):
            item.add_marker(pytest.mark.ci)
        # Integration tests share one live cluster with each other's leftovers (pods restarting,
        # namespaces terminating): each gets one rerun, shown by -rR and, when it passed only
        # then, named FLAKY at the end. Unit tests never do: a flaky unit test is a bug to fix.
        if (reruns and item.nodeid.startswith("tests/integration/")
                and not item.get_closest_marker("lifecycle")):
            item.add_marker(pytest.mark.flaky(reruns=1, reruns_delay=5))


class Ledger:
    """What the closing lines need: each test's outcome (of its last attempt), its reruns, its
    slowest attempt, and the test running when the session ended."""

    def __init__(self) -> None:
        self.attempt_started: dict[str, float] = {}
        self.attempt: dict[str, str] = {}  # the running attempt's outcome so far
        self.slowest: dict[str, float] = {}
        self.outcome: dict[str, str] = {}  # finished: passed | failed | skipped | known_open (last attempt)
        self.reruns: dict[str, int] = {}
        self.rerun_reasons: dict[str, str] = {}  # why the first attempt that was rerun failed
        self.skip_reasons: dict[str, str] = {}
        self.running: str | None = None

    def start(self, nodeid: str) -> None:
        self.attempt_started[nodeid] = time.monotonic()
        self.attempt[nodeid] = "passed"
        self.running = nodeid

    def report(self, report) -> None:
        nodeid = report.nodeid
        if report.outcome == "rerun":
            self.reruns[nodeid] = self.reruns.get(nodeid, 0) + 1
            self.rerun_reasons.setdefault(nodeid, failure_line(report))
            self.attempt[nodeid] = "rerun"  # the next attempt decides
        elif report.failed:
            self.attempt[nodeid] = "failed"
        elif report.skipped and getattr(report, "wasxfail", None) is not None:
            # a strict xfail that failed as expected: a measured gap kept on record, not a skip
            self.attempt[nodeid] = "known_open"
            self.skip_reasons[nodeid] = report.wasxfail
        elif report.skipped and self.attempt.get(nodeid) != "failed":
            self.attempt[nodeid] = "skipped"
            longrepr = report.longrepr
            self.skip_reasons[nodeid] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if report.when == "teardown" and nodeid in self.attempt_started:
            took = time.monotonic() - self.attempt_started[nodeid]
            self.slowest[nodeid] = max(self.slowest.get(nodeid, 0.0), took)
            # a rerun's teardown comes too: the last attempt's outcome is the test's
            self.outcome[nodeid] = self.attempt.pop(nodeid, "passed")
            if self.running == nodeid:
                self.running = None

    def with_outcome(self, outcome: str) -> list[str]:
        return [n for n, o in self.outcome.items() if o == outcome]

    def flaky(self) -> list[str]:
        return [n for n in self.reruns if self.outcome.get(n) == "passed"]

    def too_slow(self, items) -> list[tuple[str, float]]:
        ci = {i.nodeid for i in items if i.get_closest_marker("ci")}
        return [(n, s) for n, s in self.slowest.items() if n in ci and s > CI_TEST_SECONDS]

    def not_run(self, items) -> dict[str, int]:
        """Tests selected but never finished, counted by file."""
        files: dict[str, int] = {}
        for item in items:
            if item.nodeid not in self.outcome and item.nodeid != self.running:
                path = item.nodeid.split("::")[0]
                files[path] = files.get(path, 0) + 1
        return files


def failure_line(report, most: int = 300) -> str:
    """One line saying why an attempt failed (pytest's crash message), for the closing lines: a
    flaky test's first failure is what tells its cause, and -rR does not print it."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    text = getattr(crash, "message", None) or str(getattr(report, "longrepr", "") or "")
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 3] + "..."


LEDGER = Ledger()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Only a strict ``xfail`` marker, there before the test runs, keeps a measured gap on record
    ("known open"). A ``pytest.xfail()`` called while the test runs (behind a condition) or a
    non-strict marker would excuse whatever failed, a regression included: it is a failure."""
    report = yield
    if report.skipped and getattr(report, "wasxfail", None) is not None:
        marker = item.get_closest_marker("xfail")
        strict = marker is not None and marker.kwargs.get("strict", item.config.getini("xfail_strict"))
        if not strict or call.excinfo is not None and call.excinfo.errisinstance(pytest.xfail.Exception):
            how = "pytest.xfail() called while the test ran" if marker is None or strict else "a non-strict xfail marker"
            report.outcome = "failed"
            report.longrepr = (f"{how} excused a failure ({report.wasxfail}); only a strict xfail marker "
                               "keeps a known gap on record")
            del report.wasxfail
    return report


def pytest_runtest_logstart(nodeid):  # once per attempt: rerunfailures calls it for a rerun too
    LEDGER.start(nodeid)


def pytest_runtest_logreport(report):
    """Feed the ledger; with SREGYM_TEST_TIMINGS=FILE, also append each test's duration as it
    finishes (CI keeps the figures even when a run is cut short), and each setup or teardown of a
    second or more (a fixture that deploys an app, built once for a module: where CI's time goes
    besides the calls)."""
    LEDGER.report(report)
    path = os.environ.get("SREGYM_TEST_TIMINGS")
    if path and (report.when == "call" or report.outcome != "passed" or report.duration >= 1.0):
        with open(path, "a") as f:
            f.write(f"{report.duration:8.1f}s {report.when:<8} {report.outcome:<7} {report.nodeid}\n")


def pytest_sessionfinish(session, exitstatus):
    """A ci-tier test over its time is a tiering error: the run fails even if every test passed."""
    if exitstatus == pytest.ExitCode.OK and LEDGER.too_slow(session.items):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after pytest's short test summary
def pytest_terminal_summary(terminalreporter, exitstatus):
    yield
    tr = terminalreporter
    if tr.config.option.collectonly:
        return
    items = tr._session.items if tr._session else []  # noqa: SLF001 - the tests this run selected
    interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
    slow = LEDGER.too_slow(items)
    lines = [f"ERROR    {r.nodeid or '(session)'}: could not be collected" for r in tr.stats.get("error", [])
             if getattr(r, "when", None) == "collect"]
    lines += [f"FAILED   {n}" for n in LEDGER.with_outcome("failed")]
    lines += [f"SKIPPED  {n}: {LEDGER.skip_reasons.get(n, '')}" for n in LEDGER.with_outcome("skipped")]
    lines += [f"KNOWN OPEN {n}: {LEDGER.skip_reasons.get(n, '')} (ran and failed as expected; strict, so it turns "
              "the run red once it passes)" for n in LEDGER.with_outcome("known_open")]
    lines += [f"RERUN    {n} ({k} rerun{'s' * (k > 1)}, then {LEDGER.outcome.get(n, 'cut short')}; first failure: "
              f"{LEDGER.rerun_reasons.get(n) or 'not reported'})" for n, k in LEDGER.reruns.items()]
    lines += [f"FLAKY    {n}: passed only on its rerun" for n in LEDGER.flaky()]
    lines += [f"TIERING  {n}: took {s:.0f}s, over the ci tier's {CI_TEST_SECONDS:.0f}s per test "
              "(SREGYM_CI_TEST_SECONDS): make it faster or mark it long" for n, s in slow]
    if interrupted and LEDGER.running:
        lines.append(f"CUT      {LEDGER.running}: running when the run was interrupted")
    not_run = LEDGER.not_run(items) if interrupted else {}
    lines += [f"NOT RUN  {path} ({k} test{'s' * (k > 1)})" for path, k in not_run.items()]
    counts = {k: len(LEDGER.with_outcome(k)) for k in ("passed", "failed", "skipped", "known_open")}
    ok = exitstatus == pytest.ExitCode.OK and not slow
    why = {pytest.ExitCode.NO_TESTS_COLLECTED: ", no tests ran", pytest.ExitCode.INTERRUPTED: ", interrupted"}
    lines.append(f"RESULT   {'PASS' if ok else 'FAIL'}: {counts['passed']} passed, {counts['failed']} failed, "
                 f"{counts['skipped']} skipped, {counts['known_open']} known open, {sum(LEDGER.reruns.values())} rerun, {len(LEDGER.flaky())} flaky, "
                 f"{len(slow)} tiering, {sum(not_run.values())} not run "
                 f"(pytest exit {int(exitstatus)}{why.get(exitstatus, '')})")
    tr.write_sep("=", CLOSING, bold=True)
    for line in lines:
        notice = line.startswith(("RERUN", "SKIPPED", "KNOWN OPEN"))
        tr.write_line(line, red=not notice and not line.startswith("RESULT   PASS"), yellow=notice,
                      bold=line.startswith("RESULT"))
