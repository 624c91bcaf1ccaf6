"""The field-manager attack: an agent lists managedFields in the app namespace and names the object
carrying `kubectl-edit` (the manager a fault's field edit leaves) as the root cause. Noise must leave
the same manager on other objects, and on the root cause's own object too, with edits that neither
cure nor mask anything and that it undoes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import sregym.injectors._noise as noise
from sregym.conductor.timeline import noise_events
from sregym.core.problem import NoisePolicy, Problem
from sregym.injectors import ABSENT, INJECTORS, dig, restart_path
from sregym.injectors._objects import EDIT_MANAGER, field_manager

ROOT = "web"  # the root-cause component: the fault edits its Deployment's env
FAULT_PATH = ["spec", "template", "spec", "containers", 0, "env"]


def deployment(name: str, annotations: dict | None = None, labels: dict | None = None) -> dict:
    meta = {"name": name, "namespace": "app", "labels": labels if labels is not None else {"app": name}}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"kind": "Deployment", "metadata": meta,
            "spec": {"revisionHistoryLimit": 10, "template": {"metadata": {
                "labels": {"app": name}, "annotations": {"prometheus.io/scrape": "true"}}}}}


def service(name: str) -> dict:
    return {"kind": "Service", "metadata": {"name": name, "namespace": "app", "labels": {"app": name},
                                            "annotations": {"meta.helm.sh/release-name": "shop"}}}


APP = {"Deployment": [deployment(ROOT, {"meta.helm.sh/release-name": "shop"}), deployment("peer"),
                      deployment("cache", {"meta.helm.sh/release-name": "shop", "team": "storage"})],
       "StatefulSet": [], "Service": [service(ROOT), service("peer")]}


@pytest.fixture
def ctx(monkeypatch):
    monkeypatch.setattr(noise, "list_objects", lambda kube, kind, ns: APP.get(kind, []))
    return lambda seed: SimpleNamespace(kube=None, app_namespace="app", exclude=[ROOT], seed=seed)


def plan(ctx, seed: int, exclude: list[str] | None = None):
    cls = INJECTORS.get("noise_manual_edit")
    inj = cls(cls.Params(duration=30, exclude=exclude or []), None, ctx(seed), cls.mechanisms[0])
    return inj.plan()


def edited_objects(state) -> set[tuple[str, str]]:
    return {(e["kind"], e["name"]) for e in state.edits}


def test_the_default_noise_mix_has_a_type_that_leaves_the_managers_field_edits_leave():
    assert "manual_edit" in NoisePolicy().types
    events = [noise_events(Problem.model_validate({
        "id": "p", "title": "t", "alert": "Checkout errors are above their objective.", "app": {"name": "shop"},
        "faults": [{"id": "f", "injector": "env_var", "target": {"kind": "Deployment", "name": ROOT}}],
        "ground_truth": {"root_cause": "web lost its upstream address", "component": ROOT, "mechanism": "m", "faulty_fault_ids": ["f"]},
        "oracles": {"mitigation": [{"name": "slo"}]}, "difficulty": "easy",
        "tags": {"layer": "application", "fault_family": "config", "failure_mode": "errors"},
        "budgets": {"seconds": 900}}), seed, 900) for seed in range(20)]
    # seeded runs with the default mix really make it
    assert sum(any(e.injector == "noise_manual_edit" for e in evs) for evs in events) >= 10


def test_the_attack_names_more_than_the_root_cause(ctx):
    """Objects carrying the fault's manager after the fault and one noise edit, over many seeds:
    often not just the root cause, and the root cause is itself sometimes the noise's pick."""
    fault_objects = {("Deployment", ROOT)}
    carrying = []
    for seed in range(60):
        state = plan(ctx, seed)
        assert {field_manager(e["path"]) for e in state.edits} == {EDIT_MANAGER}
        carrying.append(fault_objects | edited_objects(state))
    assert sum(c != fault_objects for c in carrying) >= 30
    assert any(("Deployment", ROOT) in edited_objects(plan(ctx, s)) for s in range(60))  # no proof of innocence
    assert any(k == "Service" for c in carrying for k, _ in c)


def test_it_rolls_no_root_cause_pods_and_touches_no_field_a_fault_or_an_oracle_uses(ctx):
    pod_notes = 0
    for seed in range(120):
        for e in plan(ctx, seed).edits:
            path = e["path"]
            assert path != FAULT_PATH and path != restart_path()  # never the whole map a restart sets
            assert e["kind"] in ("Deployment", "StatefulSet", "Service")  # never a ConfigMap (oracles read its times)
            if path[:2] == ["spec", "template"]:  # a note on the pods rolls them: a restart could cure a fault
                pod_notes += 1
                assert path[:-1] == restart_path() and e["name"] != ROOT
                assert not path[-1].startswith(("kubectl.kubernetes.io/", "prometheus.io/"))
            else:
                assert path[:2] in (["metadata", "annotations"], ["metadata", "labels"],
                                    ["spec", "revisionHistoryLimit"])
    assert pod_notes  # the pods' template is edited too, as faults edit it


def test_it_never_overwrites_a_value_someone_set_and_undoes_to_what_was_there(ctx):
    for seed in range(60):
        for e in plan(ctx, seed).edits:
            obj = next(o for o in APP[e["kind"]] if o["metadata"]["name"] == e["name"])
            if e["path"][-2] in ("annotations", "labels"):
                assert e["before"] == ABSENT and dig(obj, e["path"]) == ABSENT
                assert e["path"][-1] not in noise.NAME_LABELS  # noise choices go by those labels
            else:
                assert e["before"] == 10 and e["after"] > 10  # more history kept: nothing is pruned


def test_same_seed_same_edit_and_the_params_exclusions_hold(ctx):
    assert plan(ctx, 3).edits == plan(ctx, 3).edits
    for seed in range(40):
        assert ("peer" not in {n for _, n in edited_objects(plan(ctx, seed, exclude=["peer"]))})


def test_a_pod_template_without_annotations_offers_no_pod_note():
    # seen live: shop-db's template has labels only; `dig` answers the ABSENT marker (a dict) there,
    # the note was offered, and the JSON patch's add under a missing map was refused (422), which
    # failed the noise and the validation of shop_redis_timeout_tiny on seed 1
    from injectors.noise_manual_edit import possible_edits

    sts = {"kind": "StatefulSet", "metadata": {"name": "shop-db", "namespace": "app", "labels": {"app": "shop-db"},
                                               "annotations": {"meta.helm.sh/release-name": "shop"}},
           "spec": {"revisionHistoryLimit": 10, "template": {"metadata": {"labels": {"app": "shop-db"}}}}}
    edits = possible_edits(sts, may_roll=True)
    assert "pod note" not in edits and {"note", "label", "history"} <= set(edits)
    with_notes = possible_edits(deployment("peer"), may_roll=True)
    assert "pod note" in with_notes  # a template that has annotations still gets one
