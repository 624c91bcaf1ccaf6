"""What the chart never had survives every deploy: ``kubectl diff`` and helm's three-way merge both
merge lists by key and maps by key, so an ``env`` entry, an ``envFrom`` source, a volume, a
container, a Service port or a ConfigMap key that someone added is invisible to the drift check
and kept by the upgrade (found by the anti-gaming matrix: an env entry outlived every later deploy).
An agent could leave one to change what the next episode, or the next cell of a suite, starts from.
``additions`` names each one and the JSON patch that removes it; jsonpatch applies the patches here
as the API server does."""

from __future__ import annotations

import copy

import jsonpatch
import pytest

from sregym.apps.additions import additions

CHART = {
    "kind": "Deployment", "metadata": {"name": "search"},
    "spec": {"template": {"spec": {
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "containers": [{"name": "search", "image": "sregym/hotel:x", "envFrom": [{"configMapRef": {"name": "s"}}],
                        "env": [{"name": "SERVICE_NAME", "value": "search"}, {"name": "PORT", "value": "8080"}],
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}]}}}}


def live_with(edit) -> dict:
    live = copy.deepcopy(CHART)
    edit(live["spec"]["template"]["spec"])
    return live


def apply(live: dict, found: list) -> dict:
    out = jsonpatch.apply_patch(live, [op for _, ops in found for op in ops])
    spec = out.get("spec", {}).get("template", {}).get("spec", {})
    if spec.get("initContainers") == []:  # an empty list is no list to the API server
        del spec["initContainers"]
    return out


@pytest.mark.parametrize("edit, says", [
    (lambda s: s["containers"][0]["env"].insert(1, {"name": "GEO_ADDR", "value": "geo-b:8080"}),
     "Deployment/search: env of container search: GEO_ADDR"),
    (lambda s: s["containers"][0]["envFrom"].append({"configMapRef": {"name": "override"}}),
     "Deployment/search: envFrom of container search: configMapRef={'name': 'override'}"),
    (lambda s: s["containers"].append({"name": "sidecar", "image": "python"}), "Deployment/search: container sidecar"),
    (lambda s: s.setdefault("initContainers", []).append({"name": "init", "image": "python"}),
     "Deployment/search: initContainer init"),
    (lambda s: (s["volumes"].append({"name": "extra", "emptyDir": {}}),
                s["containers"][0]["volumeMounts"].append({"name": "extra", "mountPath": "/extra"})), None),
], ids=["env", "envFrom", "container", "initContainer", "volume"])
def test_an_entry_the_chart_never_had_is_found_and_removed(edit, says):
    live = live_with(edit)
    found = additions(CHART, live)
    assert found
    if says:
        assert [what for what, _ in found] == [says]
    assert apply(live, found) == CHART


def test_several_entries_of_one_list_are_removed_from_the_end_so_indices_hold():
    def edit(s):
        env = s["containers"][0]["env"]
        env.insert(0, {"name": "A", "value": "1"})
        env.append({"name": "B", "value": "2"})
    live = live_with(edit)
    assert apply(live, additions(CHART, live)) == CHART


def test_a_removal_is_guarded_by_a_test_of_what_it_removes():
    live = live_with(lambda s: s["containers"][0]["env"].append({"name": "GEO_ADDR", "value": "x"}))
    [(_, ops)] = additions(CHART, live)
    moved = copy.deepcopy(live)
    moved["spec"]["template"]["spec"]["containers"][0]["env"].insert(0, {"name": "OTHER", "value": "y"})
    with pytest.raises(jsonpatch.JsonPatchTestFailed):  # the list moved since: nothing else is removed
        jsonpatch.apply_patch(moved, ops)


def test_what_the_chart_has_with_other_values_is_the_diffs_not_an_addition():
    live = live_with(lambda s: s["containers"][0]["env"][1].update(value="9090"))
    assert additions(CHART, live) == []  # kubectl diff sees a changed value; the upgrade puts it back


def test_a_service_port_and_configmap_and_secret_keys_added():
    svc = {"kind": "Service", "metadata": {"name": "geo"}, "spec": {"ports": [{"port": 8080, "targetPort": "http"}]}}
    live_svc = copy.deepcopy(svc)
    live_svc["spec"]["ports"].append({"port": 18080, "protocol": "TCP", "targetPort": 18080})
    assert [w for w, _ in additions(svc, live_svc)] == ["Service/geo: port 18080/TCP"]
    assert apply(live_svc, additions(svc, live_svc)) == svc
    cm = {"kind": "ConfigMap", "metadata": {"name": "hotel-settings"}, "data": {"GEO_ADDR": "geo:8080"}}
    live_cm = {**cm, "data": {"GEO_ADDR": "geo:8080", "GEO_ADDR_OVERRIDE": "geo-b:8080"}}
    assert [w for w, _ in additions(cm, live_cm)] == ["ConfigMap/hotel-settings: key GEO_ADDR_OVERRIDE"]
    assert apply(live_cm, additions(cm, live_cm)) == cm
    secret = {"kind": "Secret", "metadata": {"name": "db"}, "stringData": {"password": "p"}}
    live_secret = {"kind": "Secret", "metadata": {"name": "db"}, "data": {"password": "cA==", "extra": "eA=="}}
    assert [w for w, _ in additions(secret, live_secret)] == ["Secret/db: key extra"]


def test_the_chart_as_it_is_has_no_additions():
    assert additions(CHART, copy.deepcopy(CHART)) == []
