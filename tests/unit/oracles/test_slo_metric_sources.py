"""An SLO on the app's own series counts only what the app's own pods export.

pipeline_db_slow_disk grades freshness by the processor's histogram of event age, selected by the
app's namespace, where the agent may run pods. Prometheus sets ``namespace`` from the pod's real
one, so a pod the agent runs there, exporting ``stream_message_age_seconds`` with
``consumer="summaries"`` and a thousand events a second at 1 ms, pulls the p95 under the objective
while the database's disk stays slow (the anti-gaming matrix's ``fake_metrics`` once it faked the
app's own series, not only the load generator's). Every slo sample now asks Prometheus which pods
export the series such a query selects, and fails when one is not a pod the baseline's workloads
run as they ran then.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import oracles.slo as slo_module
from oracles.slo import SloOracle, SloParams
from sregym.cluster.entry_path import app_paths
from sregym.cluster.metric_sources import read_source_changes, source_changes
from sregym.core.loader import load_catalog
from sregym.core.promql import fed_from_app_namespace, render_query
from sregym.oracles import MitigationContext

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "integration" / "oracles"))

from gaming_strategies import faked_series, slo_queries as problem_slo_queries  # noqa: E402

NS = "event-pipeline"
IMAGE = "sregym/pipeline:abc"
SCRAPE = {"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics"}


def slo_queries(problem_id: str) -> list[str]:
    return problem_slo_queries(load_catalog().problems[problem_id].problem)


def deployment(name: str, command: list[str]) -> dict:
    labels = {"app.kubernetes.io/name": name}
    return {"kind": "Deployment", "metadata": {"name": name}, "spec": {"selector": {"matchLabels": labels}, "template": {
        "metadata": {"labels": labels, "annotations": dict(SCRAPE)},
        "spec": {"containers": [{"name": name, "image": IMAGE, "command": command}]}}}}


def replica_set(owner: str) -> dict:
    return {"metadata": {"name": f"{owner}-7c", "ownerReferences": [{"kind": "Deployment", "name": owner, "controller": True}]}}


def pod(owner: str, command: list[str], annotations: dict | None = None, image: str = IMAGE) -> dict:
    return {"metadata": {"name": f"{owner}-7c-a", "annotations": dict(SCRAPE if annotations is None else annotations),
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"{owner}-7c", "controller": True}]},
            "spec": {"containers": [{"name": owner, "image": image, "command": command}]}}


PROCESSOR = ["python3", "-m", "pipeline.processor"]
EXPORTER = ["python3", "-c", "fake exporter"]


def world() -> dict:
    """The processor, the one pod that exports the event-age histogram."""
    return {"pods": [pod("processor", PROCESSOR)], "replica_sets": [replica_set("processor")],
            "workloads": [deployment("processor", PROCESSOR)]}


def baseline_paths(w: dict) -> dict:
    return app_paths([], [], w["pods"], w["replica_sets"], w["workloads"], [], namespace=NS)


BASELINE = baseline_paths(world())


def with_exporter(w: dict) -> dict:
    """The agent's Deployment exporting the same series, in the app's namespace."""
    w = copy.deepcopy(w)
    w["workloads"].append(deployment("metrics-exporter", EXPORTER))
    w["replica_sets"].append(replica_set("metrics-exporter"))
    w["pods"].append(pod("metrics-exporter", EXPORTER))
    return w


def changes(w: dict, sources: set[str], recorded: dict = BASELINE) -> list[str]:
    return source_changes(sources, w["pods"], w["replica_sets"], w["workloads"], recorded)


def test_only_the_selectors_of_the_apps_own_namespace_are_fed_from_it():
    # the load generator's series are pinned to its namespace, out of the agent's reach
    queries = slo_queries("pipeline_db_slow_disk")
    fed = [sel for q in queries for sel in fed_from_app_namespace(q)]
    assert [(name, m.get("consumer")) for _, name, m in fed] == [("stream_message_age_seconds_bucket", "summaries")]
    rendered = [sel for q in queries for sel in fed_from_app_namespace(render_query(q, NS, "30s"))]
    assert [text for text, _, _ in rendered] == [
        'stream_message_age_seconds_bucket{namespace="event-pipeline",job="kubernetes-pods",consumer="summaries"}']
    # every other problem's SLOs read the load generator only
    assert not [q for q in slo_queries("shop_db_slow_disk") if fed_from_app_namespace(q)]
    # a selector with no namespace counts every namespace's pods, the app's too; a regex is no equality
    assert [m for _, _, m in fed_from_app_namespace('sum(rate(x_total{job="kubernetes-pods",a=~"b"}[1m]))')] == [
        {"job": "kubernetes-pods"}]


def test_the_apps_own_exporter_is_the_apps():
    assert changes(world(), {"processor-7c-a"}) == []
    assert changes(world(), {"processor-7c-0ld"}) == []  # a pod gone since Prometheus last scraped it


def test_a_pod_the_agent_runs_exporting_the_series_is_a_change():
    w = with_exporter(world())
    assert changes(w, {"processor-7c-a", "metrics-exporter-7c-a"}) == [
        "pod/metrics-exporter-7c-a exports them, which no workload of the baseline runs "
        "(it is Deployment/metrics-exporter's)"]
    bare = copy.deepcopy(world())
    bare["pods"].append({"metadata": {"name": "fake", "annotations": SCRAPE}, "spec": {"containers": []}})
    assert changes(bare, {"fake"}) == ["pod/fake exports them, which no workload of the baseline runs"]


def test_the_processors_pod_patched_or_scraped_elsewhere_is_a_change():
    patched = world()
    patched["pods"] = [pod("processor", PROCESSOR, image="sregym/pipeline:other")]
    assert changes(patched, {"processor-7c-a"}) == [
        "pod/processor-7c-a exports them, patched to run another image than Deployment/processor's template"]
    # a pod's annotations change in place: a stub exec'd beside the processor, scraped instead of it
    elsewhere = world()
    elsewhere["pods"] = [pod("processor", PROCESSOR, annotations={**SCRAPE, "prometheus.io/port": "18080"})]
    [why] = changes(elsewhere, {"processor-7c-a"})
    assert why.startswith("pod/processor-7c-a is scraped at ") and "18080" in why


def test_the_processors_own_template_made_to_run_an_exporter_is_a_change():
    w = world()
    w["workloads"] = [deployment("processor", EXPORTER)]
    w["pods"] = [pod("processor", EXPORTER)]
    [why] = changes(w, {"processor-7c-a"})
    assert why.startswith("Deployment/processor/processor runs another command than at the baseline"), why
    # a baseline recorded before what each workload runs was: the pod checks alone
    assert changes(w, {"processor-7c-a"}, {k: v for k, v in BASELINE.items() if k != "runs"}) == []


def test_the_sources_are_read_with_one_api_list_of_every_kind_they_need():
    w = with_exporter(world())
    lists = {"replicasets": w["replica_sets"], "pods": w["pods"], "deployments": w["workloads"], "statefulsets": []}
    calls = []

    class Kube:
        def list_json(self, api_version, plural, namespace):
            calls.append(plural)
            return {"items": [{k: v for k, v in item.items() if k != "kind"} for item in lists[plural]]}

    assert read_source_changes(Kube(), NS, set(), BASELINE) == [] and calls == []  # nothing exported: no reads
    assert len(read_source_changes(Kube(), NS, {"metrics-exporter-7c-a"}, BASELINE)) == 1
    assert sorted(calls) == ["deployments", "pods", "replicasets", "statefulsets"]


def oracle(monkeypatch, exporting: set[str], live: dict) -> tuple[list, dict]:
    """The slo oracle over one sample where every value is perfect (the fake's thousand fresh events)."""
    params = SloParams(slos=[{"name": q_name, "kind": kind, "objective": objective, "query": q} for q_name, kind,
                             objective, q in zip(("success_rate", "summary_freshness_p95_seconds"),
                                                 ("success_rate", "latency"), (0.99, 0.5),
                                                 slo_queries("pipeline_db_slow_disk"))])
    asked = []
    monkeypatch.setattr(slo_module, "measure", lambda slos, url, ns, rate: {"success_rate": 1.0,
                                                                            "summary_freshness_p95_seconds": 0.001})
    monkeypatch.setattr(slo_module, "list_app_objects", lambda kube, ns: {})
    monkeypatch.setattr(slo_module, "read_app_paths", lambda kube, ns, known=(), objects=None: live_paths)
    monkeypatch.setattr(slo_module, "exporting_pods", lambda url, selectors, ns: asked.append(selectors) or exporting)
    monkeypatch.setattr(slo_module, "read_source_changes", lambda kube, ns, sources, recorded, objects=None: changes(
        live, sources, recorded))
    monkeypatch.setattr(slo_module, "sample_window", lambda probe, window, interval, **kw: [probe()])
    monkeypatch.setattr(slo_module, "window_result", lambda name, samples, fraction, evidence: (samples, evidence))
    live_paths = baseline_paths(live)
    ctx = MitigationContext(kube=object(), namespace=NS, prometheus_url="http://prom", baseline={
        "slos": {"success_rate": {"value": 1.0}, "summary_freshness_p95_seconds": {"value": 0.02}}, "paths": BASELINE})
    samples, evidence = SloOracle(params, ctx).check()
    assert asked == [[text for q in params.slos for text, _, _ in fed_from_app_namespace(
        render_query(q["query"], NS, "30s"))]]
    return samples, evidence


def test_the_slo_oracle_fails_fresh_events_exported_by_a_pod_of_the_agents(monkeypatch):
    [(ok, detail)], evidence = oracle(monkeypatch, {"processor-7c-a", "metrics-exporter-7c-a"}, with_exporter(world()))
    assert ok is False
    assert "not only the app's own: pod/metrics-exporter-7c-a exports them" in detail["reason"], detail
    assert "stream_message_age_seconds_bucket" in evidence["metric_sources"]


def test_the_slo_oracle_passes_fresh_events_from_the_processor_alone(monkeypatch):
    [(ok, detail)], _ = oracle(monkeypatch, {"processor-7c-a"}, world())
    assert ok is True, detail


def test_the_matrix_fake_exporter_fakes_the_apps_own_series_the_slos_read():
    assert faked_series(slo_queries("pipeline_db_slow_disk")) == [
        {"name": "stream_message_age_seconds", "kind": "histogram", "labels": {"consumer": "summaries"}}]
    assert faked_series(slo_queries("shop_db_slow_disk")) == []  # the load generator's only: faked as before
    assert faked_series(['rate(x_total{namespace="$namespace",pod="p",shard="1"}[1m]) + y{namespace="$namespace"}']) == [
        {"name": "x_total", "kind": "counter", "labels": {"shard": "1"}}, {"name": "y", "kind": "gauge", "labels": {}}]


def test_a_sample_lists_the_namespace_once_for_both_checks(monkeypatch):
    # the paths check and the metric-source check read the same Pods, ReplicaSets and workloads: one
    # listing per sample (4 API reads each were made twice at every 2 s sample before)
    listed, given = [], []
    monkeypatch.setattr(slo_module, "list_app_objects", lambda kube, ns: listed.append(ns) or {"listed": True})
    monkeypatch.setattr(slo_module, "measure", lambda slos, url, ns, rate: {"success_rate": 1.0,
                                                                            "summary_freshness_p95_seconds": 0.001})
    monkeypatch.setattr(slo_module, "read_app_paths",
                        lambda kube, ns, known=(), objects=None: given.append(objects) or BASELINE)
    monkeypatch.setattr(slo_module, "exporting_pods", lambda url, selectors, ns: {"processor-5d-a"})
    monkeypatch.setattr(slo_module, "read_source_changes",
                        lambda kube, ns, sources, recorded, objects=None: given.append(objects) or [])
    monkeypatch.setattr(slo_module, "sample_window", lambda probe, window, interval, **kw: [probe()])
    monkeypatch.setattr(slo_module, "window_result", lambda name, samples, fraction, evidence: (samples, evidence))
    params = SloParams(slos=[{"name": q_name, "kind": kind, "objective": objective, "query": q} for q_name, kind,
                             objective, q in zip(("success_rate", "summary_freshness_p95_seconds"),
                                                 ("success_rate", "latency"), (0.99, 0.5),
                                                 slo_queries("pipeline_db_slow_disk"))])
    ctx = MitigationContext(kube=object(), namespace=NS, prometheus_url="http://prom", baseline={
        "slos": {"success_rate": {"value": 1.0}, "summary_freshness_p95_seconds": {"value": 0.02}}, "paths": BASELINE})
    SloOracle(params, ctx).check()
    assert listed == [NS] and given == [{"listed": True}, {"listed": True}]
