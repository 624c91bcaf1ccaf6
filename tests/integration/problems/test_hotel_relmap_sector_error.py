"""hotel_db_relmap_sector_error reaches the database process: with the bad block under the hotel
database's relation map, the running PostgreSQL fails every new backend's read of it with EIO, which
its log shows (FATAL 'could not read file "base/16384/pg_filenode.map": Input/output error'), and a
service that starts anew cannot connect (its log says why) while hotel-db stays Ready. Recover makes
new connections work again."""

from __future__ import annotations

import time

import anyio
import pytest

from fault_runs import open_fault_plane
from polling import eventually
from sregym.apps import load_app
from sregym.conductor.faultplane import serve_volumes
from sregym.core.loader import load_catalog

pytestmark = pytest.mark.cluster
NS = "hotel-reservation"
ERROR = 'could not read file "base/16384/pg_filenode.map": Input/output error'


def _new_connection(cluster) -> tuple[int, str]:
    """A new backend of the hotel database over TCP, as a service's pool opens one."""
    proc = cluster.kube.kubectl("exec", "-n", NS, "hotel-db-0", "-c", "postgres", "--", "sh", "-c",
                                'PGPASSWORD="$POSTGRES_PASSWORD" psql -h 127.0.0.1 -U "$POSTGRES_USER" -d hotel '
                                "-Atc 'SELECT count(*) FROM users'", check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _pod(cluster, app: str):
    pods = cluster.kube.core.list_namespaced_pod(NS, label_selector=f"app.kubernetes.io/name={app}").items
    return next((p for p in pods if p.metadata.deletion_timestamp is None), None)


def test_bad_relation_map_block_fails_new_connections_in_the_running_database(cluster):
    # about 60-120 s: deploy or reuse the hotel, serve its volume layer, inject, restart one service
    problem = load_catalog().problem("hotel_db_relmap_sector_error").problem
    plane, journal = open_fault_plane(cluster, problem, NS, "hotel-db")
    fault = problem.faults[0]
    db_uid = cluster.kube.core.read_namespaced_pod("hotel-db-0", NS).metadata.uid

    async def scenario() -> None:
        await serve_volumes(plane, load_app(problem.app.name))
        rc, out = _new_connection(cluster)
        assert rc == 0 and out.strip().isdigit(), out  # the layer alone changes nothing
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        await plane.start(key=fault.id, kind="fault", injector=fault.injector, params=fault.params,
                          target=fault.target, mechanism=fault.mechanism)
        assert (await plane.verify(fault.id, timeout=60)).ok
        # the running database itself fails the read: the new backend ends with the I/O error
        rc, out = _new_connection(cluster)
        assert rc != 0 and ERROR in out, out
        log = cluster.kube.kubectl("logs", "-n", NS, "hotel-db-0", "-c", "postgres", f"--since-time={since}").stdout
        assert "FATAL" in log and ERROR in log, log[-2000:]
        # a service that starts anew cannot open a connection: it says so and never becomes Ready
        old = _pod(cluster, "user")
        cluster.kube.core.delete_namespaced_pod(old.metadata.name, NS)

        def new_user_log() -> str | None:
            pod = _pod(cluster, "user")
            if pod is None or pod.metadata.uid == old.metadata.uid or pod.status.phase != "Running":
                return None
            out = cluster.kube.kubectl("logs", "-n", NS, pod.metadata.name, check=False).stdout
            return out if "Input/output error" in out else None

        log = eventually(new_user_log, timeout=90, every=3, what="the new user pod logging the database's I/O error")
        assert "pg_filenode.map" in log, log[-2000:]
        pod = _pod(cluster, "user")
        assert not any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []), pod.status
        db = cluster.kube.core.read_namespaced_pod("hotel-db-0", NS)
        assert db.metadata.uid == db_uid and any(c.type == "Ready" and c.status == "True"
                                                 for c in db.status.conditions or []), "hotel-db is not the same Ready pod"

    try:
        anyio.run(scenario)
    finally:
        errors = anyio.run(plane.recover_all)
        journal.close()
    assert not errors, errors
    rc, out = _new_connection(cluster)
    assert rc == 0 and out.strip().isdigit(), out
    cluster.kube.kubectl("rollout", "status", "deployment/user", "-n", NS, "--timeout=120s")
