"""A fault plane of one problem's app on the live cluster, as a run opens it: the app deployed (or
reused), its data store rolled out, a journal that ``sregym cleanup`` would find."""

from __future__ import annotations

import secrets

from sregym.apps import app_driver
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.journal import Journal, RunHeader


def open_fault_plane(cluster, problem, namespace: str, statefulset: str) -> tuple[FaultPlane, Journal]:
    """Deploy ``problem``'s app, wait for ``statefulset``, and open a journaled fault plane on it
    (close with ``plane.recover_all`` then ``journal.close``)."""
    app_driver().deploy(problem.app, cluster)
    cluster.kube.kubectl("rollout", "status", f"statefulset/{statefulset}", "-n", namespace, "--timeout=240s")
    run_id = "v" + secrets.token_hex(4)
    journal = Journal(run_id)
    journal.start(RunHeader(run_id=run_id, problem_id=problem.id, kubeconfig=str(cluster.kubeconfig),
                            context=cluster.context))
    return FaultPlane(journal=journal, kube=cluster.kube, app_namespace=namespace, run_id=run_id, run_seed=0), journal
