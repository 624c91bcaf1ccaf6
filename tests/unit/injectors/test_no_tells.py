"""No tells in what faults leave where the agent looks: labels, field managers, and noise that may
touch the root-cause component too (so being touched by noise proves no component innocent)."""

from types import SimpleNamespace

import pytest

import sregym.injectors._noise as noise
from sregym.core.constants import HIDDEN_NAMESPACE, OWNER_LABEL, OWNER_VALUE, RUN_LABEL
from sregym.injectors._objects import (
    EDIT_MANAGER,
    RESTART_MANAGER,
    field_manager,
    restart_path,
    without_fault_plane_labels,
)


def manifest(namespace: str, labels: dict) -> dict:
    return {"kind": "NetworkPolicy", "metadata": {"name": "default-egress", "namespace": namespace, "labels": labels}}


def test_objects_a_fault_creates_in_the_app_namespace_carry_no_fault_plane_label():
    out = without_fault_plane_labels(manifest("shop", {OWNER_LABEL: OWNER_VALUE, RUN_LABEL: "r1", "app": "api"}))
    assert out["metadata"]["labels"] == {"app": "api"}
    bare = without_fault_plane_labels(manifest("shop", {OWNER_LABEL: OWNER_VALUE, RUN_LABEL: "r1"}))
    assert "labels" not in bare["metadata"]
    # a chart's own managed-by value is not the fault plane's
    assert without_fault_plane_labels(manifest("shop", {OWNER_LABEL: "Helm"}))["metadata"]["labels"] == {
        OWNER_LABEL: "Helm"}


def test_hidden_namespace_objects_keep_their_labels_for_cleanup():
    labels = {OWNER_LABEL: OWNER_VALUE, RUN_LABEL: "r1"}
    assert without_fault_plane_labels(manifest(HIDDEN_NAMESPACE, labels))["metadata"]["labels"] == labels


def test_edits_leave_the_managers_a_persons_kubectl_leaves():
    assert field_manager(["spec", "template", "spec", "containers", 0, "env"]) == EDIT_MANAGER == "kubectl-edit"
    assert field_manager(restart_path()) == RESTART_MANAGER == "kubectl-rollout"


@pytest.fixture
def pods(monkeypatch):
    names = ["cache-1", "frontend-1", "geo-1", "search-1"]
    monkeypatch.setattr(noise, "list_objects", lambda kube, kind, ns: [{"metadata": {"name": n}} for n in names])
    return SimpleNamespace(kube=None, app_namespace="app", exclude=["geo", "search"], cured_by_restart=["search"])


def test_noise_touches_the_root_cause_unless_it_could_cure_it(pods):
    spares = [o["metadata"]["name"] for o in noise.candidates(pods, "Pod", ["cache"])]
    assert spares == ["frontend-1"]  # an edit whose undo could cross the fault's: root causes and exclusions spared
    restarts = [o["metadata"]["name"] for o in noise.candidates(pods, "Pod", ["cache"], restarts=True)]
    assert restarts == ["frontend-1", "geo-1"]  # a restart: only what a restart would cure is spared
    harmless = [o["metadata"]["name"] for o in noise.candidates(pods, "Pod", ["cache"], harmless=True)]
    assert harmless == ["frontend-1", "geo-1", "search-1"]  # log lines, lost packets: root causes too; exclusions hold
