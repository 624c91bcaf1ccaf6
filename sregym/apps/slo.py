"""Measure an app's SLOs in Prometheus from the queries in its descriptor."""

from __future__ import annotations

from typing import Any

from sregym.apps.spec import AppSpec, SloSpec, load_app
from sregym.cluster.prometheus import query_value, query_vector
from sregym.core.promql import render_query


def measure_slo(prometheus_url: str, slo: SloSpec, namespace: str, window_s: float) -> dict[str, Any]:
    """``{value, objective, kind, met, query}`` for one SLO over the last ``window_s`` seconds."""
    query = slo.render(namespace, f"{max(int(window_s), 1)}s")
    value = query_value(prometheus_url, query)
    return {"value": value, "objective": slo.objective, "kind": slo.kind, "met": slo.met_by(value), "query": query}


def measure_slos(prometheus_url: str, app: AppSpec | str, namespace: str | None = None,
                 window_s: float = 60) -> dict[str, dict[str, Any]]:
    """Every SLO of ``app`` measured over the last ``window_s`` seconds, keyed by SLO name.

    A value of None means no data (no traffic reached the load generator's metrics yet) and counts
    as not met."""
    spec = app if isinstance(app, AppSpec) else load_app(app)
    ns = namespace or spec.namespace
    return {slo.name: measure_slo(prometheus_url, slo, ns, window_s) for slo in spec.slos}


# What an app's own services and containers say while its users are not served, from the metrics
# every service built on svckit exports and the kubelet's cAdvisor: (query, line per series).
# Only what is wrong is kept (each query ends in its threshold). Apps with other metrics add nothing.
_DIAGNOSIS = (
    ('sum by (service) (rate(http_server_requests_total{namespace="$namespace",code=~"5.."}[$window]))'
     ' / sum by (service) (rate(http_server_requests_total{namespace="$namespace"}[$window])) > 0.05',
     lambda m, v: f"{m.get('service', '?')} answers {v:.0%} of its requests with a 5xx"),
    ('histogram_quantile(0.95, sum by (service, le) (rate('
     'http_server_request_duration_seconds_bucket{namespace="$namespace"}[$window]))) > 0.5',
     lambda m, v: f"{m.get('service', '?')} answers in {v:.2g} s at p95"),
    ('sum by (service, target) (rate(http_client_requests_total{namespace="$namespace",outcome="error"}[$window]))'
     ' > 0',
     lambda m, v: f"{m.get('service', '?')}'s calls to {m.get('target', '?')} fail ({v:.2g}/s after retries)"),
    ('max by (service) (http_server_requests_in_flight{namespace="$namespace"}) > 5',
     lambda m, v: f"{m.get('service', '?')} has {v:.0f} requests in flight"),
    ('sum by (pod) (rate(container_cpu_cfs_throttled_periods_total{namespace="$namespace",container!=""}[$window]))'
     ' / sum by (pod) (rate(container_cpu_cfs_periods_total{namespace="$namespace",container!=""}[$window]))'
     ' > 0.25',
     lambda m, v: f"pod {m.get('pod', '?')} is CPU-throttled in {v:.0%} of its periods"),
)


def serving_diagnosis(prometheus_url: str, namespace: str, window: str = "1m") -> list[str]:
    """One line per thing the app's services or containers show wrong now (5xx answers, slow
    answers, failing calls, a backlog, CPU throttling), so a baseline that misses its objectives
    says where users are failed, not only that they are. Empty when nothing shows."""
    lines: list[str] = []
    for query, line in _DIAGNOSIS:
        series = query_vector(prometheus_url, render_query(query, namespace, window))
        lines += [line(labels, value) for labels, value in sorted(series, key=lambda s: -s[1])]
    return lines
