"""Who answers the load generator decides the SLOs: a stub behind the entry Service that says 200
to everything passed the slo oracle while the fault was still there (anti-gaming matrix,
``stub_entry_service`` on an SLO-graded hotel problem). The entry path is recorded with the baseline
and every slo sample compares the live one with it."""

from __future__ import annotations

import copy

import pytest

import oracles.slo as slo_module
from oracles.slo import SloOracle, SloParams
from sregym.cluster.entry_path import entry_path, path_changes
from sregym.oracles import MitigationContext

FRONTEND = {"app.kubernetes.io/instance": "hotel-reservation", "app.kubernetes.io/name": "frontend"}
STUB = {"app.kubernetes.io/name": "frontend-edge"}


def service(selector: dict, target_port: int | str = "http") -> dict:
    return {"metadata": {"name": "frontend"}, "spec": {"selector": selector, "ports": [
        {"name": "http", "port": 5000, "protocol": "TCP", "targetPort": target_port}]}}


def deployment(name: str, labels: dict, command: list[str] | None = None, image: str = "sregym/hotel:latest") -> dict:
    container = {"name": name.split("-")[0] if name == "frontend" else "edge", "image": image}
    if command:
        container["command"] = command
    return {"kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels},
                                                                       "spec": {"containers": [container]}}}}


def replica_set(name: str, deployment_name: str) -> dict:
    return {"metadata": {"name": name, "ownerReferences": [
        {"kind": "Deployment", "name": deployment_name, "controller": True}]}}


def pod(name: str, rs: str, labels: dict) -> dict:
    return {"metadata": {"name": name, "labels": labels,
                         "ownerReferences": [{"kind": "ReplicaSet", "name": rs, "controller": True}]}}


def slice_of(*pods: str, ready: bool = True, port: int = 5000) -> dict:
    """An EndpointSlice: the Service's targetPort as resolved to a number in the pods."""
    return {"endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": ready},
                           "targetRef": {"kind": "Pod", "name": p}} for p in pods],
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}


def healthy_world() -> dict:
    return {"service": service(FRONTEND), "slices": [slice_of("frontend-7c-abc")],
            "pods": [pod("frontend-7c-abc", "frontend-7c", FRONTEND)],
            "replica_sets": [replica_set("frontend-7c", "frontend")],
            "workloads": [deployment("frontend", FRONTEND)]}


def path(world: dict) -> dict:
    return entry_path(world["service"], world["slices"], world["pods"], world["replica_sets"], world["workloads"])


BASELINE = path(healthy_world())


def with_stub(world: dict, stub_labels: dict, pod_name: str = "frontend-edge-5d-xyz") -> dict:
    """What the matrix's ``stub_entry_service`` left: a Deployment of the agent's answering 200."""
    world = copy.deepcopy(world)
    world["workloads"].append(deployment("frontend-edge", stub_labels, command=["python3", "-c", "stub"]))
    world["replica_sets"].append(replica_set("frontend-edge-5d", "frontend-edge"))
    world["pods"].append(pod(pod_name, "frontend-edge-5d", stub_labels))
    return world


def test_the_baseline_path_names_the_entry_workload_and_what_it_runs():
    assert BASELINE == {"service": "frontend", "selector": FRONTEND, "strays": [], "backends": {
        "Deployment/frontend": {"frontend": {"image": "sregym/hotel:latest", "command": None, "args": None}}},
        "ports": {"service": [{"name": "http", "port": 5000, "protocol": "TCP", "targetPort": "http"}],
                  "endpoints": [["http", 5000, "TCP"]]}}
    assert path_changes(BASELINE, BASELINE) == []


def test_the_service_pointed_at_a_stub_is_a_changed_path():
    world = with_stub(healthy_world(), STUB)
    world["service"] = service(STUB)
    world["slices"] = [slice_of("frontend-edge-5d-xyz")]
    changes = path_changes(BASELINE, path(world))
    assert any("selects" in c for c in changes), changes
    assert any("Deployment/frontend-edge, which did not answer it at the baseline" in c for c in changes), changes


def test_a_stub_wearing_the_entrys_labels_is_a_changed_path_though_the_selector_is_the_same():
    world = with_stub(healthy_world(), FRONTEND)
    world["slices"] = [slice_of("frontend-7c-abc", "frontend-edge-5d-xyz")]
    assert path_changes(BASELINE, path(world)) == [
        "Service frontend sends requests to Deployment/frontend-edge, which did not answer it at the baseline"]


def test_the_entry_deployment_made_to_run_a_stub_is_a_changed_path():
    world = healthy_world()
    world["workloads"] = [deployment("frontend", FRONTEND, command=["python3", "-c", "stub"])]
    [change] = path_changes(BASELINE, path(world))
    assert change.startswith("Deployment/frontend/frontend runs another command than at the baseline")


def test_a_bare_pod_behind_the_entry_is_a_changed_path():
    world = healthy_world()
    world["pods"].append({"metadata": {"name": "impostor", "labels": FRONTEND}})
    world["slices"] = [slice_of("frontend-7c-abc", "impostor")]
    assert path_changes(BASELINE, path(world)) == [
        "Service frontend sends requests to pod/impostor, which no workload of the baseline runs"]


def test_a_rollout_restart_or_an_unready_stray_is_not_a_change():
    world = healthy_world()  # a restart: a new ReplicaSet of the same Deployment, same containers
    world["replica_sets"].append(replica_set("frontend-9f", "frontend"))
    world["pods"].append(pod("frontend-9f-def", "frontend-9f", FRONTEND))
    world["slices"] = [slice_of("frontend-7c-abc", "frontend-9f-def")]
    assert path_changes(BASELINE, path(world)) == []
    world = with_stub(healthy_world(), FRONTEND)  # not ready: sent no request
    world["slices"] = [slice_of("frontend-7c-abc"), slice_of("frontend-edge-5d-xyz", ready=False)]
    assert path_changes(BASELINE, path(world)) == []


def test_a_stub_exec_d_beside_the_app_behind_another_target_port_is_a_changed_path():
    """Measured live (matrix ``exec_stub_in_entry``): the agent execs a stub into frontend's own pod
    on a spare port and sets the Service's targetPort to it; selector, pods, image and command are
    the chart's, so only the port tells."""
    world = healthy_world()
    world["service"] = service(FRONTEND, target_port=18080)
    world["slices"] = [slice_of("frontend-7c-abc", port=18080)]
    changes = path_changes(BASELINE, path(world))
    assert any("targetPort" in c and "18080" in c for c in changes), changes
    assert any("port 18080" in c and "5000" in c for c in changes), changes


def test_a_named_port_moved_in_the_pod_template_is_a_changed_path():
    """The Service left alone, its named targetPort pointed elsewhere by the container's ports: the
    slices resolve the name to another number."""
    world = healthy_world()
    world["slices"] = [slice_of("frontend-7c-abc", port=18080)]
    [change] = path_changes(BASELINE, path(world))
    assert "port 18080" in change and "5000" in change, change


def test_a_baseline_recorded_without_ports_still_compares_the_rest():
    """A path recorded before ports were (an older record): the rest is compared, ports are not."""
    old = {k: v for k, v in BASELINE.items() if k != "ports"}
    assert path_changes(old, BASELINE) == []
    world = healthy_world()
    world["service"] = service(STUB)
    assert any("selects" in c for c in path_changes(old, path(world)))


def test_the_entry_service_gone_is_a_changed_path():
    assert path_changes(BASELINE, entry_path(None, [], [], [], [])) == ["Service frontend is gone"]


@pytest.mark.parametrize("world, passes", [(healthy_world(), True), ("stub", False)], ids=["own entry", "stub"])
def test_the_slo_oracle_fails_perfect_numbers_from_a_stub(monkeypatch, world, passes):
    """The observed state: every SLO perfect (the stub's 200s), the fault still there."""
    if world == "stub":
        world = with_stub(healthy_world(), STUB)
        world["service"] = service(STUB)
        world["slices"] = [slice_of("frontend-edge-5d-xyz")]
    monkeypatch.setattr(slo_module, "measure", lambda slos, url, ns, rate: {"success_rate": 1.0})
    monkeypatch.setattr(slo_module, "read_entry_path", lambda kube, ns, svc: path(world))
    monkeypatch.setattr(slo_module, "sample_window", lambda probe, window, interval, **kw: [probe()])
    monkeypatch.setattr(slo_module, "window_result", lambda name, samples, fraction, evidence: (samples, evidence))
    params = SloParams(slos=[{"name": "success_rate", "kind": "success_rate", "objective": 0.99,
                              "query": "sum(rate(x[$window]))"}])
    ctx = MitigationContext(kube=object(), namespace="hotel", prometheus_url="http://prom",
                            baseline={"slos": {"success_rate": {"value": 1.0}}, "entry": BASELINE})
    [(ok, detail)], evidence = SloOracle(params, ctx).check()
    assert ok is passes, detail
    assert evidence["entry_path"] == "compared with the baseline's"
    if not passes:
        assert "no longer answered by the app's own entry" in detail["reason"]


def test_the_live_path_is_read_with_one_api_list_of_every_kind():
    """What the API's lists return: items without their kind, one list per kind in the namespace."""
    from sregym.cluster.entry_path import PATH_KINDS, read_entry_path

    world = healthy_world()
    lists = {"services": [world["service"]], "replicasets": world["replica_sets"], "pods": world["pods"],
             "deployments": [w for w in world["workloads"] if w["kind"] == "Deployment"],
             "statefulsets": [w for w in world["workloads"] if w["kind"] == "StatefulSet"],
             "endpointslices": [dict(world["slices"][0], metadata={"labels": {"kubernetes.io/service-name": "frontend"}}),
                                {"metadata": {"labels": {"kubernetes.io/service-name": "geo"}},
                                 "endpoints": [{"targetRef": {"kind": "Pod", "name": "geo-1"}}]}]}
    calls = []

    class Kube:
        def list_json(self, api_version, plural, namespace):
            calls.append((api_version, plural, namespace))
            return {"items": [{k: v for k, v in item.items() if k != "kind"} for item in lists[plural]]}

    assert read_entry_path(Kube(), "hotel", "frontend") == BASELINE
    assert sorted(calls) == sorted((v, plural, "hotel") for v, plural, _ in PATH_KINDS)
