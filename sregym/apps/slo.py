"""Measure an app's SLOs in Prometheus from the queries in its descriptor."""

from __future__ import annotations

import math
from typing import Any

import httpx

from sregym.apps.spec import AppSpec, SloSpec, load_app
from sregym.core.errors import ClusterError

# The shortest window a success rate means something over. The load generators send about 5
# requests a second (4.3-5 measured), so 20 s hold ~90-100 requests and ~10 scrapes at the 2 s pod
# scrape (charts/observability ``podScrapeInterval``): one stray failed request then moves the rate
# by ~1%, inside the SLO oracle's 2% tolerance. Over 10 s (~45 requests) one stray failure alone
# would reach the tolerance, and the rate would jump with the scrape phase.
MIN_RATE_WINDOW_SECONDS = 20


def query_value(prometheus_url: str, query: str, *, timeout: float = 15.0) -> float | None:
    """One number from an instant query; None when there is no (finite) data yet."""
    try:
        r = httpx.get(f"{prometheus_url.rstrip('/')}/api/v1/query", params={"query": query}, timeout=timeout)
    except httpx.HTTPError as e:
        raise ClusterError(f"Prometheus at {prometheus_url} is not reachable: {e}") from None
    if r.status_code != 200:
        raise ClusterError(f"Prometheus rejected the query {query!r}: HTTP {r.status_code} {r.text[:300]}")
    result = r.json()["data"]["result"]
    if not result:
        return None
    if len(result) > 1:
        raise ClusterError(f"the SLO query {query!r} gave {len(result)} series; it must aggregate to one")
    value = float(result[0]["value"][1])
    return value if math.isfinite(value) else None


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
