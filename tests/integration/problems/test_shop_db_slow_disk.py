"""shop_db_slow_disk on the live cluster: the running database's commits wait the disk's delay (a
commit flushes its WAL with fdatasync) while its reads stay fast, and after the run that injected it
is SIGKILLed, ``sregym cleanup`` (``cleanup_all``) takes the tracers off from the journal: commits
are fast again and the journal is closed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from polling import eventually
from sregym.apps import app_driver
from sregym.conductor.cleanup import cleanup_all
from sregym.conductor.journal import open_journals
from sregym.core.loader import load_catalog

pytestmark = pytest.mark.cluster
NS = "online-shop"
REPO = Path(__file__).resolve().parents[3]

INJECT_AND_WAIT = r"""
import anyio, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from sregym.cluster.providers import ExistingCluster
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.journal import Journal, RunHeader
from sregym.core.loader import load_catalog

kubeconfig, context, journal_dir = sys.argv[2], sys.argv[3] or None, Path(sys.argv[4])
cluster = ExistingCluster(Path(kubeconfig), context).up()
p = load_catalog().problems["shop_db_slow_disk"].problem
f = p.faults[0]

async def main():
    journal = Journal("k" + time.strftime("%H%M%S"), journal_dir)
    journal.start(RunHeader(run_id=journal.run_id, problem_id=p.id, kubeconfig=kubeconfig, context=context))
    plane = FaultPlane(journal=journal, kube=cluster.kube, app_namespace="online-shop", run_id=journal.run_id, run_seed=0)
    await plane.start(key=f.id, kind="fault", injector=f.injector, params=f.params, target=f.target, mechanism=f.mechanism)
    check = await plane.verify(f.id, timeout=60)
    print("injected" if check.ok else "not verified: " + check.detail, flush=True)
    await anyio.sleep(3600)

anyio.run(main)
"""


def _timings(cluster) -> tuple[float, float]:
    """(ms of a read-only query, ms of a commit that writes WAL) in one local session of shop-db. The
    transaction must write WAL (a temporary table's catalog rows): one that only took an xid commits
    without waiting for a flush."""
    proc = cluster.kube.kubectl(
        "exec", "-n", NS, "shop-db-0", "-c", "postgres", "--", "sh", "-c",
        'psql -X -h /tmp -U "$POSTGRES_USER" -d postgres -c "\\timing on" -c "SELECT count(*) FROM pg_class" '
        '-c "BEGIN" -c "CREATE TEMP TABLE scratch (x int)" -c "COMMIT"', check=False)
    times = [float(t) for t in re.findall(r"Time: ([0-9.]+) ms", proc.stdout)]
    assert proc.returncode == 0 and len(times) == 4, proc.stdout + proc.stderr
    return times[0], times[3]


def test_commits_wait_for_the_slow_disk_and_cleanup_after_a_kill_removes_it(cluster, tmp_path):
    # about 30-60 s: reuse the shop, inject in a run that is then SIGKILLed, clean up from its journal
    app_driver().deploy(load_catalog().problem("shop_db_slow_disk").problem.app, cluster)
    cluster.kube.kubectl("rollout", "status", "statefulset/shop-db", "-n", NS, "--timeout=240s")
    _, before = _timings(cluster)
    assert before < 300, before
    journal_dir = tmp_path / "journal"
    proc = subprocess.Popen([sys.executable, "-c", INJECT_AND_WAIT, str(REPO), str(cluster.kubeconfig),
                             cluster.context or "", str(journal_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline().strip()
        read, commit = _timings(cluster) if line == "injected" else (0.0, 0.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run dies mid-fault, nothing recovered
        proc.wait()
        results = cleanup_all(lambda header: cluster.kube, directory=journal_dir)
    assert line == "injected", line
    assert commit >= 590, (read, commit)  # the WAL flush waits the disk's 600 ms
    assert read < 300, (read, commit)  # reads answered from memory do not
    assert [(r.recovered, r.errors, r.closed) for r in results] == [(["db_disk_slow"], [], True)]
    assert open_journals(journal_dir) == []
    eventually(lambda: _timings(cluster)[1] < 300, timeout=20, every=2, what="commits fast again")
