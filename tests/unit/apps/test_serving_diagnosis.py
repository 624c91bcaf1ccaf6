"""serving_diagnosis: what an app's services show while its users are not served (the line a
refused baseline carries), from canned Prometheus answers. The live check is
tests/integration/apps/test_baseline_store_on_cluster.py."""

from __future__ import annotations

import pytest

from sregym.apps import slo

pytestmark = pytest.mark.ci


def canned(answers: dict[str, list[tuple[dict, float]]], asked: list[str]):
    """A query_vector that answers by the metric a query reads and records every query."""
    def query_vector(_url: str, query: str):
        asked.append(query)
        return next((series for metric, series in answers.items() if metric in query), [])
    return query_vector


def test_each_sign_of_trouble_is_one_line_worst_first_and_only_for_the_namespace_asked(monkeypatch):
    asked: list[str] = []
    monkeypatch.setattr(slo, "query_vector", canned({
        "http_server_requests_total": [({"service": "frontend"}, 0.4), ({"service": "search"}, 1.0)],
        "http_client_requests_total": [({"service": "search", "target": "geo"}, 2.9)],
        "http_server_requests_in_flight": [({"service": "geo"}, 41.0)],
        "container_cpu_cfs_throttled_periods_total": [({"pod": "geo-6d9f"}, 0.93)],
    }, asked), raising=True)
    lines = slo.serving_diagnosis("http://prom", "hotel-gaming")
    assert lines == [
        "search answers 100% of its requests with a 5xx",
        "frontend answers 40% of its requests with a 5xx",
        "search's calls to geo fail (2.9/s after retries)",
        "geo has 41 requests in flight",
        "pod geo-6d9f is CPU-throttled in 93% of its periods",
    ]
    assert len(asked) == len(slo._DIAGNOSIS)
    for query in asked:  # every selector names the namespace asked, and nothing else is left to fill in
        assert 'namespace="hotel-gaming"' in query and "$" not in query, query


def test_an_app_whose_services_show_nothing_wrong_gives_no_line(monkeypatch):
    monkeypatch.setattr(slo, "query_vector", canned({}, []))
    assert slo.serving_diagnosis("http://prom", "shop") == []
