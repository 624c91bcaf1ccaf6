"""Instant queries to the in-cluster Prometheus, as the host reaches it (the SLO baseline and the
SLO oracle read it the same way)."""

from __future__ import annotations

import math

import httpx

from sregym.core.errors import ClusterError


def query_vector(prometheus_url: str, query: str, *, timeout: float = 15.0) -> list[tuple[dict[str, str], float]]:
    """Every series of an instant query as (labels, value); series without a finite value left out."""
    return [(labels, value) for labels, value in _instant(prometheus_url, query, timeout) if math.isfinite(value)]


def _instant(prometheus_url: str, query: str, timeout: float) -> list[tuple[dict[str, str], float]]:
    try:
        r = httpx.get(f"{prometheus_url.rstrip('/')}/api/v1/query", params={"query": query}, timeout=timeout)
    except httpx.HTTPError as e:
        raise ClusterError(f"Prometheus at {prometheus_url} is not reachable: {e}") from None
    if r.status_code != 200:
        raise ClusterError(f"Prometheus rejected the query {query!r}: HTTP {r.status_code} {r.text[:300]}")
    return [(s.get("metric", {}), float(s["value"][1])) for s in r.json()["data"]["result"]]


def query_value(prometheus_url: str, query: str, *, timeout: float = 15.0) -> float | None:
    """One number from an instant query; None when there is no (finite) data yet."""
    result = _instant(prometheus_url, query, timeout)
    if not result:
        return None
    if len(result) > 1:
        raise ClusterError(f"the SLO query {query!r} gave {len(result)} series; it must aggregate to one")
    value = result[0][1]
    return value if math.isfinite(value) else None
