"""event-pipeline's queue is run by its operator: the QueueCluster reports what runs, and a manual
scale of the StatefulSet it manages is put back (what makes a bad CR field an operator fault)."""

from __future__ import annotations

import pytest

from sregym.apps import deploy, status
from sregym.apps.lifecycle import delete
from app_observe import eventually

pytestmark = pytest.mark.cluster

NS = "event-pipeline"


def _queue_cluster(cluster) -> dict:
    from kubernetes import client

    return client.CustomObjectsApi(cluster.kube.api_client).get_namespaced_custom_object(
        "pipeline.sregym.io", "v1", NS, "queueclusters", "pipeline-queue")


def _replicas(cluster) -> int:
    return cluster.kube.apps.read_namespaced_stateful_set("pipeline-queue", NS).spec.replicas


def test_the_operator_reports_the_queue_and_puts_back_a_manual_scale(cluster, observability):
    deploy(cluster, "event-pipeline", timeout=600)  # reused in seconds when healthy
    qc = eventually(lambda: (q := _queue_cluster(cluster)).get("status", {}).get("phase") == "Ready" and q,
                    timeout=60, what="QueueCluster pipeline-queue Ready")
    assert qc["status"]["readyReplicas"] == qc["spec"]["replicas"] == 1
    cluster.kube.apps.patch_namespaced_stateful_set_scale("pipeline-queue", NS, {"spec": {"replicas": 0}})
    eventually(lambda: _replicas(cluster) == 1, timeout=30, every=1, what="the operator restoring replicas 1")
    eventually(lambda: status(cluster, "event-pipeline").ready, timeout=120, what="event-pipeline ready again")


def test_deleting_the_app_removes_its_queue_cluster_before_the_operator(cluster, observability):
    """The operator's finalizer on the QueueCluster is removed only by the operator: the app's
    delete takes the object first, so the namespace goes (it stayed terminating for ever when both
    went at once). Also keeps the third app off the 2-core CI host for the tests after this one."""
    from kubernetes.client.exceptions import ApiException

    deploy(cluster, "event-pipeline", timeout=600)
    assert delete(cluster, "event-pipeline", timeout=180)
    with pytest.raises(ApiException) as gone:
        cluster.kube.core.read_namespace(NS)
    assert gone.value.status == 404
