"""Every Service's path and the app's wiring, read from the real cluster: a deployed app's paths
compare equal to themselves, and a copy of one of its components put behind that component's
Service by the agent (its own kubeconfig, RBAC and API proxy: the matrix's
``clone_faulty_component``) is a change the slo oracle fails on, named as such; once it is undone
the paths are the baseline's again. The unit tests (tests/unit/oracles/test_slo_app_paths.py) hold
every other form; this one proves the reading on live objects (Services, EndpointSlices, pods,
ReplicaSets, workloads, ConfigMaps as the API serves them)."""

from __future__ import annotations

import json
import time

import pytest
from gaming_strategies import Board, clone_faulty_component

from sregym.apps import app_driver
from sregym.cluster.entry_path import app_path_changes, read_app_paths
from sregym.core.problem import AppRef

pytestmark = pytest.mark.cluster

NAMESPACE = "hotel-reservation"


def test_a_copy_of_a_component_behind_its_service_is_a_changed_path_and_undoing_it_is_not(cluster, tmp_path):
    app = app_driver().deploy(AppRef(name="hotel-reservation", namespace=NAMESPACE), cluster)  # reused when undrifted
    kube = cluster.kube
    baseline = read_app_paths(kube, app.namespace)
    assert {"frontend", "search", "geo"} <= set(baseline["services"]), baseline["services"].keys()
    assert baseline["wiring"]["Deployment/search/search env GEO_ADDR"] == ["geo:8080"]
    assert app_path_changes(baseline, read_app_paths(kube, app.namespace, known=baseline["services"])) == []

    selector = baseline["services"]["geo"]["selector"]
    played = clone_faulty_component(Board(kube, app.namespace, "geo", tmp_path))
    try:
        assert not played.refused, played.outcome  # the agent may: it creates Deployments and edits Services
        changes = app_path_changes(baseline, read_app_paths(kube, app.namespace, known=baseline["services"]))
        assert any(c.startswith("Service geo selects") for c in changes), changes
        assert "Service geo sends requests to Deployment/geo-b, which did not answer it at the baseline" in changes
    finally:
        kube.kubectl("patch", "service", "geo", "-n", app.namespace, "--type=json", "-p",
                     json.dumps([{"op": "replace", "path": "/spec/selector", "value": selector}]))
        for undo in played.cleanup:
            undo()
    deadline = time.monotonic() + 60  # the EndpointSlice controller follows the selector back
    while (changes := app_path_changes(baseline, read_app_paths(kube, app.namespace, known=baseline["services"]))) \
            and time.monotonic() < deadline:
        time.sleep(1)
    assert changes == []
