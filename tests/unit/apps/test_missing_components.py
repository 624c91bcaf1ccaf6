"""An app is not ready while a component its descriptor names does not run at all: an operator
creates event-pipeline's queue StatefulSet only after the install, and the app was once reported
ready (and its baseline measured) before the queue existed."""

from __future__ import annotations

from sregym.apps import load_app
from sregym.apps.lifecycle import WorkloadStatus, missing_components


def test_a_store_the_operator_has_not_created_yet_is_missing():
    spec = load_app("event-pipeline")
    running = [WorkloadStatus(kind=c.kind, name=c.name, ready=1, desired=1)
               for c in [*spec.services, *spec.datastores] if c.name != "pipeline-queue"]
    assert [(w.kind, w.name, w.ready, w.desired) for w in missing_components(spec, running)] == [
        ("StatefulSet", "pipeline-queue", 0, 1)]
    queue = WorkloadStatus(kind="StatefulSet", name="pipeline-queue", ready=0, desired=0)
    assert missing_components(spec, [*running, queue]) == []  # scaled to zero is there, not missing
