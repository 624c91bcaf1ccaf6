"""A probe, lifecycle hook or volume someone rewrote another way breaks the next deploy: helm's
three-way merge adds the chart's handler (``httpGet``) beside the one written (``tcpSocket``) and the
API refuses the upgrade ("may not specify more than 1 handler type"). Found by the anti-gaming
matrix: after ``loosen_probes`` on hotel_profile_liveness_probe (profile's liveness, broken by the
fault as a TCP check, copied into its readiness probe), the next cell's deploy of hotel-reservation
failed. ``union_conflicts`` names each such field and the patch that puts the chart's back before
the upgrade; jsonpatch applies it here as the API server does."""

from __future__ import annotations

import copy

import jsonpatch

from sregym.apps.additions import union_conflicts

READY = {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 5}
LIVE = {"httpGet": {"path": "/healthz", "port": 8080}}
CHART = {
    "kind": "Deployment", "metadata": {"name": "profile"},
    "spec": {"template": {"spec": {
        "volumes": [{"name": "conf", "configMap": {"name": "profile-conf"}}],
        "containers": [{"name": "profile", "image": "sregym/hotel:x", "readinessProbe": READY, "livenessProbe": LIVE,
                        "lifecycle": {"preStop": {"sleep": {"seconds": 2}}}}]}}}}


def edited(edit) -> dict:
    live = copy.deepcopy(CHART)
    edit(live["spec"]["template"]["spec"])
    return live


def put_back(live: dict) -> dict:
    return jsonpatch.apply_patch(live, [op for _, ops in union_conflicts(CHART, live) for op in ops])


def test_a_readiness_probe_made_a_tcp_check_is_put_back_whole():
    live = edited(lambda s: s["containers"][0].update(
        readinessProbe={"tcpSocket": {"port": 8080}, "failureThreshold": 30}))
    assert [w for w, _ in union_conflicts(CHART, live)] == [
        "Deployment/profile: readinessProbe of container profile checks another way"]
    assert put_back(live) == CHART


def test_a_volume_of_another_source_and_a_hook_acting_another_way_are_put_back():
    def edit(s):
        s["volumes"][0] = {"name": "conf", "emptyDir": {}}
        s["containers"][0]["lifecycle"]["preStop"] = {"exec": {"command": ["true"]}}
    live = edited(edit)
    assert sorted(w for w, _ in union_conflicts(CHART, live)) == [
        "Deployment/profile: preStop hook of container profile acts another way",
        "Deployment/profile: volume conf of another source"]
    assert put_back(live) == CHART


def test_values_changed_within_the_same_handler_are_left_to_the_merge():
    # a loosened threshold or another path: the upgrade's merge puts those back by itself
    live = edited(lambda s: s["containers"][0].update(
        readinessProbe={"httpGet": {"path": "/healthz", "port": 8080}, "failureThreshold": 30}))
    assert union_conflicts(CHART, live) == []
    assert union_conflicts(CHART, copy.deepcopy(CHART)) == []


def test_a_probe_removed_or_added_is_not_a_conflict():
    # removed: the merge adds the chart's back; added where the chart has none: nothing to put back
    assert union_conflicts(CHART, edited(lambda s: s["containers"][0].pop("readinessProbe"))) == []
    assert union_conflicts(CHART, edited(lambda s: s["containers"][0].update(startupProbe=LIVE))) == []


def test_the_patch_tests_what_it_replaces():
    live = edited(lambda s: s["containers"][0].update(readinessProbe={"tcpSocket": {"port": 8080}}))
    [(_, ops)] = union_conflicts(CHART, live)
    moved = copy.deepcopy(live)
    moved["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] = {"exec": {"command": ["true"]}}
    try:
        jsonpatch.apply_patch(moved, ops)
    except jsonpatch.JsonPatchTestFailed:
        return
    raise AssertionError("a patch computed on one object applied to another that changed meanwhile")
