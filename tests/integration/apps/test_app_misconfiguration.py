"""A setting broken by hand shows up the way an SRE would see it, and fixing it recovers:
the hotel's geo Service pointed at a wrong port."""

from __future__ import annotations

import json

import pytest

from sregym.apps import deploy, load_app
from app_observe import eventually, log_lines, prom, traces

pytestmark = pytest.mark.cluster
APP = "hotel-reservation"


def _set_target_port(cluster, namespace: str, port: int | str) -> None:
    patch = [{"op": "replace", "path": "/spec/ports/0/targetPort", "value": port}]
    cluster.kube.kubectl("-n", namespace, "patch", "service", "geo", "--type", "json", "-p", json.dumps(patch))


def test_wrong_service_port_is_visible_in_metrics_logs_traces_and_recovers(cluster, observability):
    ns = load_app(APP).namespace
    deploy(cluster, APP, timeout=900)
    failing_calls = (f'sum(increase(http_client_requests_total{{namespace="{ns}",service="search",target="geo",'
                     f'outcome="error"}}[1m]))')
    client_errors = f'sum(rate(loadgen_requests_total{{namespace="observability",target_namespace="{ns}",outcome!="ok"}}[1m]))'
    # Put back what was there (the chart's named port "http", not its number): a later problem
    # that breaks geo's named containerPort relies on the Service targeting the name.
    original = cluster.kube.core.read_namespaced_service("geo", ns).spec.ports[0].target_port
    _set_target_port(cluster, ns, 9)
    try:
        # metrics: the caller's error counter and the users' failures both rise
        assert eventually(lambda: (prom(observability, failing_calls) or 0) > 0, timeout=180,
                          what="search->geo call errors in Prometheus")
        assert eventually(lambda: (prom(observability, client_errors) or 0) > 0, timeout=120,
                          what="client-side failures in Prometheus")
        # logs: search says which call failed and why
        lines = eventually(lambda: [ln for ln in log_lines(observability, ns, "call failed", since="3m")
                                    if '"target": "geo"' in ln["line"]], timeout=120, what="'call failed' log lines")
        assert any("Connect" in ln["line"] or "refused" in ln["line"].lower() for ln in lines)
        # traces: the search span towards geo is marked as an error
        errored = eventually(lambda: [t for t in traces(observability, "search", tags='{"error":"true"}')
                                      if any(s["operationName"].startswith("GET geo") for s in t["spans"])],
                             timeout=120, what="an error trace from search to geo")
        assert errored
    finally:
        _set_target_port(cluster, ns, original)
    assert cluster.kube.core.read_namespaced_service("geo", ns).spec.ports[0].target_port == original
    # recovered: no new failing calls for a full minute
    eventually(lambda: prom(observability, failing_calls) == 0, timeout=240, every=10,
               what="search->geo errors back to zero")
    eventually(lambda: (prom(observability, client_errors) or 0) == 0, timeout=180, every=10,
               what="client-side failures back to zero")
