"""Measure an app's SLOs in Prometheus from the queries in its descriptor."""

from __future__ import annotations

from typing import Any

from sregym.apps.spec import AppSpec, SloSpec, load_app
from sregym.cluster.prometheus import query_value


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
