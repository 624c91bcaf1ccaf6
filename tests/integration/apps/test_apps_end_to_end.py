"""Each of our apps deploys from scratch on the real cluster, serves its workload within its SLOs,
and an SRE can follow a request through metrics, traces and logs."""

from __future__ import annotations

import json
import time

import pytest

from sregym.apps import delete, deploy, load_app, measure_slos, status
from app_observe import eventually, log_lines, prom, traces

pytestmark = pytest.mark.cluster

# per app: the service that receives the workload, and a query counting rows the workload writes
APPS = {
    "hotel-reservation": {"entry": "frontend", "db_pod": "hotel-db-0", "db": "hotel", "user": "hotel",
                          "rows": "SELECT count(*) FROM reservations",
                          "served": {"frontend", "search", "geo", "rate", "profile", "recommendation", "user",
                                     "reservation"}},
    # the shop's worker serves no requests: it takes orders off the queue (counted separately)
    "online-shop": {"entry": "web", "db_pod": "shop-db-0", "db": "shop", "user": "shop",
                    "rows": "SELECT count(*) FROM orders WHERE status = 'fulfilled'", "served": {"web", "api"}},
}


@pytest.fixture(scope="module", params=list(APPS))
def app(request, cluster, observability):
    """The app deployed from scratch (release, namespace and stored data removed first)."""
    name = request.param
    delete(cluster, name, purge_data=True)
    started = time.monotonic()
    result = deploy(cluster, name, timeout=900)
    return {"name": name, "spec": load_app(name), "result": result, "seconds": time.monotonic() - started,
            **APPS[name]}


def _rows(cluster, app) -> int:
    out = cluster.kube.kubectl("-n", app["spec"].namespace, "exec", app["db_pod"], "-c", "postgres", "--",
                               "psql", "-h", "/tmp", "-U", app["user"], "-d", app["db"], "-tAc", app["rows"])
    return int(out.stdout.strip())


def test_deploys_from_scratch_to_every_pod_ready(cluster, app):
    assert not app["result"].reused
    current = status(cluster, app["name"])
    assert current.ready, current.problems
    # the load generator runs in the observability namespace (out of the agent's reach)
    loadgen = f"observability/{app['spec'].workload.service}-{app['spec'].namespace}"
    assert {w.name for w in current.workloads} == set(app["spec"].components) | {loadgen}
    assert all(p.ready for p in current.pods)


def test_a_second_deploy_reuses_the_healthy_release(cluster, app):
    again = deploy(cluster, app["name"])
    assert again.reused and again.chart_hash == app["result"].chart_hash
    assert again.seconds < 30


def test_a_release_that_drifted_from_the_chart_is_put_back_not_reused(cluster, app):
    """A Service left with a numeric targetPort (as a test once left geo's) looks healthy, but a
    problem that breaks the named port would then have no effect: deploy must notice and reset."""
    ns, entry = app["spec"].namespace, app["entry"]
    read = lambda: cluster.kube.core.read_namespaced_service(entry, ns).spec.ports[0].target_port  # noqa: E731

    def set_target_port(port: int | str) -> None:
        patch = [{"op": "replace", "path": "/spec/ports/0/targetPort", "value": port}]
        cluster.kube.kubectl("-n", ns, "patch", "service", entry, "--type", "json", "-p", json.dumps(patch))

    assert read() == "http"
    set_target_port(8080)
    # and the entry's readiness probe rewritten as a bare TCP check (the anti-gaming matrix's
    # loosen_probes): helm's merge would add the chart's httpGet beside the tcpSocket, which the API
    # refuses ("may not specify more than 1 handler type"), so the upgrade itself failed
    probe = lambda: cluster.kube.apps.read_namespaced_deployment(entry, ns).spec.template.spec.containers[0].readiness_probe  # noqa: E731
    port = probe().http_get.port
    loosen = [{"op": "replace", "path": "/spec/template/spec/containers/0/readinessProbe",
               "value": {"tcpSocket": {"port": port}, "failureThreshold": 30}}]
    cluster.kube.kubectl("-n", ns, "patch", "deployment", entry, "--type", "json", "-p", json.dumps(loosen))
    try:
        again = deploy(cluster, app["name"])
    finally:
        set_target_port("http")
    assert not again.reused
    assert again.drift_reset in ([f"v1.Service.{ns}.{entry}", f"apps.v1.Deployment.{ns}.{entry}"], ["(unknown)"])
    assert read() == "http"
    assert probe().http_get is not None and probe().tcp_socket is None
    assert deploy(cluster, app["name"]).reused  # and the next deploy finds nothing to put back


def test_requests_flow_from_the_entry_service_to_the_database(cluster, app):
    before = _rows(cluster, app)
    eventually(lambda: _rows(cluster, app) > before, timeout=120, what=f"new rows from `{app['rows']}`")


def test_prometheus_has_the_app_and_load_generator_series(observability, app):
    ns = app["spec"].namespace
    query = f'count by (service) (http_server_requests_total{{namespace="{ns}"}})'

    def services():
        return all(prom(observability, f'sum(http_server_requests_total{{namespace="{ns}",service="{svc}"}})')
                   for svc in app["served"])

    eventually(services, timeout=180, what=f"request series of {sorted(app['served'])} ({query})")
    sent = eventually(lambda: prom(observability, f'sum(loadgen_requests_total{{namespace="observability",target_namespace="{ns}"}})'),
                      timeout=120, what="load generator series in Prometheus")
    assert sent > 0
    assert prom(observability, f'count(db_pool_max_connections{{namespace="{ns}"}})') >= 1
    if app["name"] == "online-shop":
        eventually(lambda: prom(observability, f'sum(queue_messages_processed_total{{namespace="{ns}"}})'),
                   timeout=120, what="orders taken off the queue by the worker")


def test_slos_are_met_under_the_default_load(observability, app):
    ns = app["spec"].namespace

    def all_met():
        measured = measure_slos(observability["prometheus"], app["spec"], ns, 60)
        return measured if all(m["met"] for m in measured.values()) else None

    # asked every 3 s, not 15: the load generator is scraped every 2 s (podScrapeInterval), so the
    # window is clean of the deploy's wake up to 15 s before a 15 s poll saw it (7.5 s per app on average)
    measured = eventually(all_met, timeout=300, every=3, what="every SLO met over 60s")
    assert set(measured) == {s.name for s in app["spec"].slos}


def _services(trace: dict) -> set[str]:
    return {p["serviceName"] for p in trace["processes"].values()}


def _wide_trace(observability, app) -> dict | None:
    found = traces(observability, app["entry"])
    wide = [t for t in found if len(_services(t)) >= 3]
    return wide[0] if wide else None


def test_a_trace_spans_at_least_three_services(observability, app):
    trace = eventually(lambda: _wide_trace(observability, app), timeout=180, what="a trace across 3 services")
    assert len(_services(trace)) >= 3


def test_the_log_query_follows_one_request_id_across_services(observability, app):
    trace = eventually(lambda: _wide_trace(observability, app), timeout=180, what="a trace across 3 services")
    request_id = next(t["value"] for s in trace["spans"] for t in s["tags"] if t["key"] == "request.id")
    lines = eventually(lambda: log_lines(observability, app["spec"].namespace, request_id), timeout=120,
                       what=f"log lines with request id {request_id}")
    containers = {line["container"] for line in lines}
    assert len(containers) >= 3, containers
