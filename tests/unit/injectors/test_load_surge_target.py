"""A load surge hits the load generator of the namespace the app runs in: the charts run one per
app namespace (``loadgen-<namespace>``), so a problem that named ``loadgen-online-shop`` surged the
``online-shop`` namespace's users while the app under test ran in ``online-shop-gaming`` at its
usual rate (the anti-gaming cells of shop_api_traffic_surge)."""

from __future__ import annotations

import injectors.load_surge as load_surge
from sregym.core.problem import Selector
from sregym.injectors import FaultContext
from sregym.core.loader import load_catalog

LOADGEN = {"metadata": {"name": "loadgen-online-shop-gaming", "namespace": "observability"},
           "spec": {"template": {"spec": {"containers": [{"name": "loadgen", "env": []}]}}}}


def surge(target: Selector, monkeypatch) -> tuple[tuple, list]:
    asked = []

    def find_workload(kube, ns, selector, where="target"):
        asked.append((ns, selector))
        return "Deployment", LOADGEN

    monkeypatch.setattr(load_surge, "find_workload", find_workload)
    ctx = FaultContext(kube=None, app_namespace="online-shop-gaming", hidden_namespace="h", seed=0, run_id="r")
    inj = load_surge.LoadSurge(load_surge.LoadSurgeParams(env={"LOADGEN_RPS": "20"}), target, ctx,
                               load_surge.LoadSurge.mechanisms[0])
    return inj.locate(), asked


def test_a_target_without_a_name_is_the_load_generator_that_drives_the_apps_namespace(monkeypatch):
    (kind, ns, obj, i), asked = surge(Selector(namespace="observability", kind="Deployment", container="loadgen"),
                                      monkeypatch)
    assert (kind, ns, obj["metadata"]["name"], i) == ("Deployment", "observability", "loadgen-online-shop-gaming", 0)
    ((where, selector),) = asked
    assert where == "observability" and selector.labels == {"target-namespace": "online-shop-gaming"}


def test_a_named_target_is_taken_as_named(monkeypatch):
    named = Selector(namespace="observability", kind="Deployment", name="loadgen-online-shop", container="loadgen")
    monkeypatch.setattr(load_surge.WorkloadEdit, "locate", lambda self: ("Deployment", "observability", {}, 0))
    assert surge(named, monkeypatch)[0][1] == "observability"


def test_no_catalog_surge_names_one_namespaces_load_generator():
    for lp in load_catalog().problems.values():
        p = lp.problem
        for f in p.faults:
            if f.injector == "load_surge":
                assert not f.target.name and not f.target.labels, (
                    f"{p.id}: fault {f.id} names {f.target.describe()}: it would surge that load generator's "
                    "namespace, not the app's wherever the app runs")
