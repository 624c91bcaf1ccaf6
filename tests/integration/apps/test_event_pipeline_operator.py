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


KOPF_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


def test_kopf_holds_its_finalizer_on_the_queue_cluster(cluster, observability):
    """The operator has no delete handler, yet kopf puts its finalizer on every QueueCluster it
    runs a timer for (the resync): only the running operator lets one go (charts/event-pipeline/README.md)."""
    deploy(cluster, "event-pipeline", timeout=600)
    assert KOPF_FINALIZER in _queue_cluster(cluster)["metadata"].get("finalizers", [])


def _queue_pods(cluster) -> list:
    return [p for p in cluster.kube.core.list_namespaced_pod(
        NS, label_selector="app.kubernetes.io/name=pipeline-queue").items if not p.metadata.deletion_timestamp]


def test_a_finalizer_nothing_removes_keeps_the_deleted_queue_down_until_taken_off(cluster, observability):
    """stuck_finalizer on the operator's StatefulSet: deleted (foreground) with a finalizer no
    controller removes, it hangs in Terminating with no pod, and the operator makes no new one over
    several resyncs; recover takes the finalizer off and the operator makes it again."""
    import json
    import time

    from sregym.core.constants import HIDDEN_NAMESPACE
    from sregym.core.problem import Selector
    from sregym.injectors import INJECTORS, KUBERNETES_API, FaultContext

    deploy(cluster, "event-pipeline", timeout=600)
    eventually(lambda: status(cluster, "event-pipeline").ready, timeout=180, what="event-pipeline ready")
    before = cluster.kube.apps.read_namespaced_stateful_set("pipeline-queue", NS).metadata.uid
    cls = INJECTORS.get("stuck_finalizer")
    fault = cls(cls.parse_params({"finalizer": "pipeline.sregym.io/drain"}),
                Selector(kind="StatefulSet", name="pipeline-queue"),
                FaultContext(kube=cluster.kube, app_namespace=NS, hidden_namespace=HIDDEN_NAMESPACE), KUBERNETES_API)
    state = fault.load_state(json.loads(json.dumps(fault.dump_state(fault.plan()))))  # as journaled
    try:
        fault.inject(state)
        assert fault.verify(state).ok
        eventually(lambda: not _queue_pods(cluster), timeout=90, every=2, what="the queue's pod gone")
        time.sleep(20)  # four resyncs of the operator
        sts = cluster.kube.apps.read_namespaced_stateful_set("pipeline-queue", NS)
        assert sts.metadata.uid == before and sts.metadata.deletion_timestamp
        assert not _queue_pods(cluster)
        assert _queue_cluster(cluster)["status"]["readyReplicas"] == 0
    finally:
        fault.recover(state)
    after = cluster.kube.apps.read_namespaced_stateful_set("pipeline-queue", NS)
    assert after.metadata.uid != before and "pipeline.sregym.io/drain" not in (after.metadata.finalizers or [])
    fault.recover(state)  # again: nothing to do
    assert cluster.kube.apps.read_namespaced_stateful_set("pipeline-queue", NS).metadata.uid == after.metadata.uid
    eventually(lambda: status(cluster, "event-pipeline").ready, timeout=180, what="event-pipeline ready again")

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
