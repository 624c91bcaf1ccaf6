"""No tells (issue 15): what shop-db's postgres container shows of its own mounts (``/proc/self/
mountinfo``, ``mount``, ``df``) is the same in a healthy run of the shop and during the
latent_sector_error fault. The healthy view is the one every run of the shop has before its
baseline (the app deployed, the fault plane's volume layer serving the data store's files); the
faulty one is read after the fault went in and was verified."""

from __future__ import annotations

import re

import anyio
import pytest

from fault_runs import open_fault_plane
from sregym.apps import load_app
from sregym.conductor.faultplane import serve_volumes
from sregym.core.loader import load_catalog

pytestmark = pytest.mark.cluster
NS = "online-shop"
# (field 1 mount id and 2 parent id) are kernel counters: renumbered in order of appearance
_IDS = re.compile(r"^(\d+) (\d+) ")


def _exec(cluster, *cmd: str) -> str:
    proc = cluster.kube.kubectl("exec", "-n", NS, "shop-db-0", "-c", "postgres", "--", *cmd, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def mount_view(cluster) -> dict[str, list[str]]:
    """The container's mounts as an agent would list them, with the kernel's ids renumbered and
    df's changing numbers (used and free blocks) left out."""
    ids: dict[str, str] = {}

    def renumber(m: re.Match) -> str:
        return " ".join(ids.setdefault(x, f"m{len(ids)}") for x in m.groups()) + " "

    mountinfo = [_IDS.sub(renumber, line) for line in _exec(cluster, "cat", "/proc/self/mountinfo").splitlines()]
    df = [" ".join(line.split()[:1] + line.split()[5:]) for line in _exec(cluster, "df", "-P").splitlines()]
    return {"mountinfo": mountinfo, "mount": _exec(cluster, "mount").splitlines(), "df": df}


def test_the_database_sees_the_same_mounts_in_healthy_and_faulty_runs(cluster):
    # about 60-90 s: deploy or reuse the shop, roll out shop-db, serve, inject and verify, recover
    problem = load_catalog().problem("latent_sector_error").problem
    plane, journal = open_fault_plane(cluster, problem, NS, "shop-db")
    fault = problem.faults[0]

    async def scenario() -> tuple[dict, dict]:
        await serve_volumes(plane, load_app(problem.app.name))
        healthy = mount_view(cluster)
        await plane.start(key=fault.id, kind="fault", injector=fault.injector, params=fault.params,
                          target=fault.target, mechanism=fault.mechanism)
        assert (await plane.verify(fault.id, timeout=60)).ok
        return healthy, mount_view(cluster)

    try:
        healthy, faulty = anyio.run(scenario)
    finally:
        errors = anyio.run(plane.recover_all)
        journal.close()
    assert not errors, errors
    for view in ("mountinfo", "mount", "df"):
        assert faulty[view] == healthy[view], (view, sorted(set(faulty[view]) ^ set(healthy[view])))
