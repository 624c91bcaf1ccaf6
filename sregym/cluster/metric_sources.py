"""Who exported the series an SLO reads from the app's own namespace.

An SLO on the load generator's series is out of the agent's reach: the load generator runs in a
namespace the agent may not change, and the query selects that namespace (docs/grading.md). An SLO
on the app's own series (pipeline_db_slow_disk's freshness: the processor's histogram of event
age) selects the app's namespace, where the agent may run pods; Prometheus sets ``namespace`` from
the pod's real one, so a pod the agent runs there, exporting the same name and labels with a
thousand fresh events a second, makes the freshness perfect while the disk stays slow (the
anti-gaming matrix's ``fake_metrics``). Those numbers are the app's only while every pod exporting
them is one the app's own workloads run as they ran at the baseline: a pod of a workload of the
baseline, running its workload's template (not patched in place), scraped where its template says
(a pod's annotations can be changed in place: a stub exec'd beside the app, scraped instead of it),
and its workload running what it ran at the baseline.

:func:`source_changes` is pure (Kubernetes objects as JSON); :func:`exporting_pods` and
:func:`read_source_changes` read Prometheus and the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sregym.cluster.entry_path import PATH_KINDS, _list_kinds, _patched, runs, runs_changes, workload_of
from sregym.cluster.prometheus import query_vector

# the pod annotations that say where Prometheus scrapes it
SCRAPE_ANNOTATION = "prometheus.io/"
# what says which workload runs a pod, and what it runs
SOURCE_KINDS = tuple(k for k in PATH_KINDS if k[2] in ("Deployment", "StatefulSet", "ReplicaSet", "Pod"))


def exporting_pods(prometheus_url: str, selectors: Iterable[str], namespace: str) -> set[str]:
    """The pods of ``namespace`` whose series match any of ``selectors`` (PromQL series selectors)
    now (a pod gone is gone from an instant query within a scrape: it exports nothing more)."""
    pods = set()
    for selector in dict.fromkeys(selectors):
        for labels, _ in query_vector(prometheus_url, f"count by (namespace, pod) ({selector})"):
            if labels.get("namespace") == namespace and labels.get("pod"):
                pods.add(labels["pod"])
    return pods


def _scraped_at(meta: dict) -> dict[str, str]:
    return {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(SCRAPE_ANNOTATION)}


def source_changes(sources: Iterable[str], pods: list[dict], replica_sets: list[dict], workloads: list[dict],
                   recorded: dict[str, Any]) -> list[str]:
    """Why the pods named in ``sources`` (those exporting a series an SLO reads) are not the app's own
    as at the baseline (``recorded``: the baseline's app paths, its ``workloads`` and their ``runs``);
    empty when they are. A pod not listed is gone and skipped. ``workloads``: Deployments and
    StatefulSets, each with its ``kind``."""
    by_pod = {p["metadata"]["name"]: p for p in pods}
    by_rs = {r["metadata"]["name"]: r for r in replica_sets}
    by_ref = {f"{w['kind']}/{w['metadata']['name']}": w for w in workloads}
    ours = set(recorded.get("workloads") or [])
    before = recorded.get("runs")  # None: a baseline recorded before what each workload runs was
    out: list[str] = []
    for name in sorted(set(sources)):
        pod = by_pod.get(name)
        if pod is None:
            continue
        ref = workload_of(pod, by_rs)
        if ref is None or ref not in ours or ref not in by_ref:
            out.append(f"pod/{name} exports them, which no workload of the baseline runs"
                       + (f" (it is {ref}'s)" if ref else ""))
            continue
        template = by_ref[ref]["spec"]["template"]
        patched = _patched(pod, runs(template.get("spec") or {}))
        if patched:
            out.append(f"pod/{name} exports them, patched to run another {patched} than {ref}'s template")
            continue
        if _scraped_at(pod["metadata"]) != _scraped_at(template.get("metadata") or {}):
            out.append(f"pod/{name} is scraped at {_scraped_at(pod['metadata'])}, where {ref}'s template says "
                       f"{_scraped_at(template.get('metadata') or {})}")
            continue
        if before is not None:
            out += [c for c in runs_changes(ref, before.get(ref) or {}, runs(template.get("spec") or {}))
                    if c not in out]
    return out


def read_source_changes(kube: Any, namespace: str, sources: Iterable[str], recorded: dict[str, Any], *,
                        objects: dict[str, list] | None = None) -> list[str]:
    """:func:`source_changes` of ``namespace`` as the cluster has it now (``objects``: the namespace's
    objects by kind as the caller just listed them, e.g. ``entry_path.list_app_objects``, which holds
    every kind of ``SOURCE_KINDS``)."""
    sources = set(sources)
    if not sources:
        return []
    by_kind = objects if objects is not None else _list_kinds(
        kube, namespace, SOURCE_KINDS, f"the pods exporting the SLOs' series in namespace {namespace}")
    return source_changes(sources, by_kind["Pod"], by_kind["ReplicaSet"], by_kind["Deployment"] + by_kind["StatefulSet"],
                          recorded)
