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


# -- the managedFields detective: when `kubectl-edit` was written, and on which fields ----------------------------

VERIFY_S = 3.0  # how long the faults take to verify before the agent is paged
METADATA = (["metadata", "annotations"], ["metadata", "labels"], ["spec", "revisionHistoryLimit"])


def with_containers(obj: dict) -> dict:
    if obj["kind"] != "Deployment":
        return obj
    tpl = obj["spec"]["template"]
    name = obj["metadata"]["name"]
    return obj | {"spec": obj["spec"] | {"template": tpl | {"spec": {"containers": [
        {"name": name, "image": f"{name}:1", "env": [{"name": "PORT", "value": "8080"}]}]}}}}


@pytest.fixture
def app_ctx(monkeypatch):
    app = {kind: [with_containers(o) for o in objs] for kind, objs in APP.items()}
    monkeypatch.setattr(noise, "list_objects", lambda kube, kind, ns: app.get(kind, []))
    return lambda seed: SimpleNamespace(kube=None, app_namespace="app", exclude=[ROOT], seed=seed)


def hand_edit_problem() -> Problem:
    return Problem.model_validate({
        "id": "p", "title": "t", "alert": "Checkout errors are above their objective.", "app": {"name": "shop"},
        "faults": [{"id": "f", "injector": "env_var", "target": {"kind": "Deployment", "name": ROOT}}],
        "ground_truth": {"root_cause": "web lost its upstream address", "component": ROOT, "mechanism": "m",
                         "faulty_fault_ids": ["f"]},
        "oracles": {"mitigation": [{"name": "slo"}]}, "difficulty": "easy",
        "tags": {"layer": "application", "fault_family": "config", "failure_mode": "errors"},
        "budgets": {"seconds": 900}})


def kubectl_edit_writes(ctx, problem: Problem, seed: int) -> tuple[list[tuple[float, tuple[str, str], list]], float]:
    """Every `kubectl-edit` write of a seeded noisy run, as (when, object, path), and when the agent is
    paged: the faults' edits at their offsets, each manual_edit noise as the fault plane plans it
    (its seed and params), played as the player plays it (events at the onset once the faults are
    verified, the rest no earlier than the page)."""
    from sregym.conductor.timeline import incident_onset, resolve_timeline
    from sregym.core.seeds import derive_seed

    events = resolve_timeline(problem, seed, True)
    onset = incident_onset(events)
    page = onset + VERIFY_S + 1.0
    writes = [(f.at, ("Deployment", ROOT), FAULT_PATH) for f in problem.faults]
    cls = INJECTORS.get("noise_manual_edit")
    for ev in events:
        if ev.kind != "noise" or ev.action != "start" or ev.injector != "noise_manual_edit":
            continue
        when = ev.at if ev.at < onset else onset + VERIFY_S if ev.at == onset else max(ev.at, page)
        inj = cls(cls.Params(**ev.params), None, ctx(derive_seed(seed, "noise", ev.name)), cls.mechanisms[0])
        writes += [(when, (e["kind"], e["name"]), e["path"]) for e in inj.plan().edits]
    return writes, page


def detectives(writes, page: float) -> dict[str, tuple[str, str] | None]:
    """What an agent that reads only managedFields (entry per object: the time of its last write)
    names as the root cause's object, by three rules, reading at the page (the spec rule reads
    through the agent's first minute)."""
    before: dict[tuple[str, str], float] = {}  # as read at the page: later writes are not there yet
    for when, obj, _ in writes:
        if when < page:
            before[obj] = max(before.get(obj, when), when)
    spec = {o for when, o, path in writes if when < page + 60 and not any(path[:len(m)] == m for m in METADATA)
            and path[:-1] != restart_path()[:-1]}
    newest = sorted(before, key=before.get, reverse=True)
    return {**{f"{rank} latest before the page": newest[k] if len(newest) > k else None
               for k, rank in enumerate(("1st", "2nd", "3rd"))},
            "only one before the page": next(iter(before)) if len(before) == 1 else None,
            "only one on a spec field in the first minute": next(iter(spec)) if len(spec) == 1 else None}


def test_the_managed_fields_detective_names_the_root_cause_no_better_than_chance(app_ctx):
    """The attack on the times and fields of `kubectl-edit` entries, over 200 seeded noisy runs: the
    object whose entry is the latest (2nd, 3rd latest) before the page, the only one written before
    it, or the only one on a field faults write. Before the lead-in, the latest, the only one and the
    only spec one named the root cause in every run."""
    problem, seeds = hand_edit_problem(), range(200)
    hits = {rule: 0 for rule in detectives([], 0.0)}
    chance = 0.0  # a guess among the objects whose entry was written before the page
    for seed in seeds:
        writes, page = kubectl_edit_writes(app_ctx, problem, seed)
        for rule, named in detectives(writes, page).items():
            hits[rule] += named == ("Deployment", ROOT)
        chance += 1 / len({o for when, o, _ in writes if when < page})
    rate = {rule: n / len(seeds) for rule, n in hits.items()}
    chance /= len(seeds)
    assert rate["only one before the page"] == 0.0, rate
    assert rate["only one on a spec field in the first minute"] == 0.0, rate
    # measured over these seeds: 1st 0.26, 2nd 0.365, 3rd 0.325, a guess 0.33 (the fault's own edit
    # makes its object a little likelier to be in a given rank than another's)
    assert max(rate[f"{r} latest before the page"] for r in ("1st", "2nd", "3rd")) <= 0.42, (rate, chance)
    assert chance <= 0.4


def test_every_noisy_run_has_a_hand_edit_before_the_page_and_one_in_the_first_minute(app_ctx):
    problem = hand_edit_problem()
    for seed in range(100):
        writes, page = kubectl_edit_writes(app_ctx, problem, seed)
        noise_writes = [w for w in writes if w[2] != FAULT_PATH or w[1] != ("Deployment", ROOT)]
        assert any(when < 0 for when, _, _ in noise_writes)  # before the fault was injected
        assert any(page <= when < page + 60 for when, _, _ in noise_writes)  # in the agent's first minute
        spec = [w for w in noise_writes if not any(w[2][:len(m)] == m for m in METADATA)
                and w[2][:-1] != restart_path()[:-1] and w[0] < page]
        assert spec and all(o != ("Deployment", ROOT) for _, o, _ in spec)  # never rolls the root cause
    assert resolve_lead(problem, 5) == resolve_lead(problem, 5)  # same seed, same schedule


def resolve_lead(problem: Problem, seed: int) -> list[tuple]:
    from sregym.conductor.timeline import resolve_timeline

    return [(e.at, e.name, e.params) for e in resolve_timeline(problem, seed, True) if "lead" in e.name]


def test_an_env_edit_adds_one_unread_variable_outside_the_root_cause_and_undoes_to_the_list_that_was_there(app_ctx):
    from injectors.noise_manual_edit import ENV

    envs = 0
    for seed in range(80):
        for e in plan(app_ctx, seed).edits + plan_spec(app_ctx, seed).edits:
            if e["path"][-1] != "env":
                continue
            envs += 1
            assert e["name"] != ROOT and e["kind"] == "Deployment"  # it rolls pods
            assert e["before"] == [{"name": "PORT", "value": "8080"}]
            assert e["after"][:-1] == e["before"] and e["after"][-1]["name"] in ENV
    assert envs


def plan_spec(ctx, seed: int):
    cls = INJECTORS.get("noise_manual_edit")
    return cls(cls.Params(sort="spec"), None, ctx(seed), cls.mechanisms[0]).plan()


def test_no_env_edit_on_a_stateful_set():
    # a StatefulSet's roll takes its pod down before the new one starts (a database would be down)
    from injectors.noise_manual_edit import possible_edits

    sts = with_containers(deployment("db")) | {"kind": "StatefulSet"}
    assert "env" not in possible_edits(sts, may_roll=True)
    assert "env" in possible_edits(with_containers(deployment("db")), may_roll=True)
