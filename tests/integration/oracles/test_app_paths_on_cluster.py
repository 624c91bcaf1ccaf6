"""Every Service's path and the app's wiring, read from the real cluster: a deployed app's paths
compare equal to themselves, and a copy of one of its components put behind that component's
Service by the agent (its own kubeconfig, RBAC and API proxy: the matrix's
``clone_faulty_component``) is a change the slo oracle fails on, named as such; once it is undone
the paths are the baseline's again. The unit tests (tests/unit/oracles/test_slo_app_paths.py) hold
every other form; this one proves the reading on live objects (Services, EndpointSlices, pods,
ReplicaSets, workloads, ConfigMaps as the API serves them). A store's port moved in the app's
ConfigMap, its host left as it was, is a change too: the port is compared paired with its host."""

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


def test_a_stores_port_moved_apart_from_its_host_is_a_changed_wiring_and_putting_it_back_is_not(cluster):
    """``DB_PORT`` in ``hotel-settings`` moved to a port where the agent's own code could answer,
    ``DB_HOST`` left alone: every database caller is given another address. No pod is restarted
    (the pods read the setting when they start), so the app serves on as it was."""
    app = app_driver().deploy(AppRef(name="hotel-reservation", namespace=NAMESPACE), cluster)  # reused when undrifted
    kube = cluster.kube
    baseline = read_app_paths(kube, app.namespace)
    key = "Deployment/geo/geo env DB_HOST with DB_PORT"
    assert baseline["wiring"][key] == ["hotel-db:5432"], baseline["wiring"].get(key)
    port = json.loads(kube.kubectl("get", "configmap", "hotel-settings", "-n", app.namespace,
                                   "-o", "json").stdout)["data"]["DB_PORT"]

    def set_port(value: str) -> None:
        kube.kubectl("patch", "configmap", "hotel-settings", "-n", app.namespace, "--type=merge", "-p",
                     json.dumps({"data": {"DB_PORT": value}}))

    set_port("15432")
    try:
        changes = app_path_changes(baseline, read_app_paths(kube, app.namespace, known=baseline["services"]))
    finally:
        set_port(port)
    [change] = [c for c in changes if c.startswith("env DB_HOST with DB_PORT of ")]
    assert "Deployment/geo/geo" in change and change.endswith("names hotel-db:15432 (at the baseline hotel-db:5432)"), \
        change
    assert app_path_changes(baseline, read_app_paths(kube, app.namespace, known=baseline["services"])) == []
