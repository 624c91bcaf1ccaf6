"""Whichever oracles grade a problem, a mitigation is the app's own: a copy of the faulty component
behind its Service (or any stand-in a Service or a caller's address is pointed at) satisfies an
``http_probe`` as well as real users, while the fault stays where it was. The slo oracle compares
the paths at every sample; the grade compares them once more for every problem, after the
oracles' windows, and a rerouted app's mitigation fails with no partial credit."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import anyio

import sregym.conductor.grading as grading
from sregym.cluster.entry_path import app_paths
from sregym.core.problem import Problem
from sregym.core.record import CheckResult, MitigationGrade
from sregym.oracles import MITIGATION_ORACLES, MitigationOracle, mitigation_oracle
from sregym.oracles._api import NoParams
from sregym.oracles._reward import RewardWeights, _mitigation_term

if "unit_probe_passes" not in MITIGATION_ORACLES.names():
    @mitigation_oracle("unit_probe_passes")
    class ProbePasses(MitigationOracle):
        """What an http_probe sees when someone answers the request right."""

        Params = NoParams

        def check(self) -> CheckResult:
            return CheckResult(name="unit_probe_passes", passed=True, message="5/5 requests answered")

    @mitigation_oracle("unit_field_fails")
    class FieldFails(MitigationOracle):
        Params = NoParams

        def check(self) -> CheckResult:
            return CheckResult(name="unit_field_fails", passed=False, message="the field is still wrong")


def problem(*oracles: str) -> Problem:
    return Problem.model_validate({
        "id": "unit_rerouted", "title": "t", "alert": "Search fails for every user.", "app": {"name": "a"},
        "faults": [{"id": "f", "injector": "unit_file_value", "target": {"name": "geo"},
                    "params": {"file": "/nonexistent", "value": "bad"}}],
        "ground_truth": {"root_cause": "a bad geo value", "component": "geo", "mechanism": "m"},
        "oracles": {"mitigation": [{"name": o} for o in oracles]},
        "difficulty": "easy", "tags": {"layer": "application", "fault_family": "f", "failure_mode": "error"}})


LABELS = {"app.kubernetes.io/name": "geo"}
COPY = {"app.kubernetes.io/name": "geo-b"}


def world(selector: dict, *, with_copy: bool) -> dict:
    svc = {"metadata": {"name": "geo"}, "spec": {"selector": selector, "ports": [{"port": 8080, "targetPort": 8080}]}}

    def deployment(name: str, labels: dict) -> dict:
        return {"kind": "Deployment", "metadata": {"name": name}, "spec": {"template": {
            "metadata": {"labels": labels}, "spec": {"containers": [{"name": "geo", "image": "hotel"}]}}}}

    def pod(name: str, owner: str, labels: dict) -> dict:
        return {"metadata": {"name": name, "labels": labels, "ownerReferences": [
            {"kind": "ReplicaSet", "name": f"{owner}-1", "controller": True}]},
            "spec": {"containers": [{"name": "geo", "image": "hotel"}]}}

    names = ["geo", "geo-b"] if with_copy else ["geo"]
    answering = "geo-b-1-x" if selector == COPY else "geo-1-x"
    return dict(
        services=[svc],
        slices=[{"metadata": {"labels": {"kubernetes.io/service-name": "geo"}}, "ports": [{"port": 8080}],
                 "endpoints": [{"conditions": {"ready": True}, "targetRef": {"kind": "Pod", "name": answering}}]}],
        pods=[pod(f"{n}-1-x", n, COPY if n == "geo-b" else LABELS) for n in names],
        replica_sets=[{"metadata": {"name": f"{n}-1", "ownerReferences": [
            {"kind": "Deployment", "name": n, "controller": True}]}} for n in names],
        workloads=[deployment(n, COPY if n == "geo-b" else LABELS) for n in names], configmaps=[])


BASELINE = {"paths": app_paths(**world(LABELS, with_copy=False), namespace="app")}


def grade(oracles: tuple[str, ...], live: dict, monkeypatch, baseline: dict = BASELINE) -> MitigationGrade:
    monkeypatch.setattr(grading, "read_app_paths", lambda kube, ns, known=(): app_paths(**live, namespace=ns))
    monkeypatch.setattr(grading, "read_dns_changes", lambda kube, ns, loadgen_namespace: [])  # test_grade_dns_rewrite.py
    app = SimpleNamespace(namespace="app", prometheus_url=None, info=None)
    return anyio.run(lambda: grading.grade_mitigation(problem(*oracles), app, SimpleNamespace(kube=None),
                                                      baseline, 0.1))


def test_a_probe_answered_by_a_copy_of_the_faulty_component_does_not_pass(monkeypatch):
    g = grade(("unit_probe_passes",), world(COPY, with_copy=True), monkeypatch)
    assert [c.passed for c in g.checks] == [True]  # the oracle's own verdict is kept
    assert not g.passed
    assert any(r.startswith("Service geo selects") for r in g.rerouted), g.rerouted
    assert "Service geo sends requests to Deployment/geo-b, which did not answer it at the baseline" in g.rerouted


def test_a_rerouted_app_earns_no_partial_credit(monkeypatch):
    g = grade(("unit_probe_passes", "unit_field_fails"), world(COPY, with_copy=True), monkeypatch)
    assert not g.passed and g.rerouted
    assert _mitigation_term(g, RewardWeights().mitigation_partial_factor) == 0.0
    g = grade(("unit_probe_passes", "unit_field_fails"), world(LABELS, with_copy=True), monkeypatch)
    assert not g.passed and not g.rerouted  # a copy nothing is sent to is not a reroute
    assert _mitigation_term(g, RewardWeights().mitigation_partial_factor) > 0.0


def test_the_apps_own_path_passes_and_an_old_baseline_is_not_compared(monkeypatch):
    assert grade(("unit_probe_passes",), world(LABELS, with_copy=False), monkeypatch).passed
    g = grade(("unit_probe_passes",), world(COPY, with_copy=True), monkeypatch, baseline={})
    assert g.passed and g.rerouted == []  # recorded before paths were: nothing to compare with


def test_paths_that_cannot_be_read_fail_the_grade(monkeypatch):
    def broken(kube, ns, known=()):
        raise grading.ClusterError("the API server did not answer")

    app = SimpleNamespace(namespace="app", prometheus_url=None, info=None)
    monkeypatch.setattr(grading, "read_app_paths", broken)
    g = anyio.run(lambda: grading.grade_mitigation(problem("unit_probe_passes"), app, SimpleNamespace(kube=None),
                                                   copy.deepcopy(BASELINE), 0.1))
    assert not g.passed and g.rerouted == ["the app's paths could not be read: the API server did not answer"]
