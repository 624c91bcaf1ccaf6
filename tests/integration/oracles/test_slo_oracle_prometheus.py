"""The ``slo`` oracle against a real Prometheus (Debian's, on loopback) scraping a workload's
client-side metrics: it fails while the success rate or p95 latency is off the baseline, and
passes once they are back. The workload here is a local exporter whose request outcomes the test
steers; Prometheus, its scraping and PromQL evaluation are the real ones."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from sregym.oracles import MITIGATION_ORACLES, MitigationContext
from oracles.slo import measure
from sregym.oracles._slos import slos_from

BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
SLOS = [
    {"name": "success_rate", "kind": "success_rate",
     "query": 'sum(rate(app_requests_total{code!~"5.."}[$window])) / sum(rate(app_requests_total[$window]))'},
    {"name": "p95_latency", "kind": "latency",
     "query": "histogram_quantile(0.95, sum by (le) (rate(app_request_duration_seconds_bucket[$window])))"},
]


class Workload:
    """Simulated client traffic at ~50 requests/s whose error share and latency the test sets."""

    def __init__(self) -> None:
        self.error_share, self.latency, self.running = 0.0, 0.02, True
        self.codes = {"200": 0, "500": 0}
        self.buckets = dict.fromkeys(BUCKETS, 0)
        self.count, self.sum = 0, 0.0
        self.lock = threading.Lock()
        self.rng = random.Random(7)
        self.stop = threading.Event()

    def loop(self) -> None:
        while not self.stop.wait(0.02):
            if not self.running:
                continue
            with self.lock:
                self.codes["500" if self.rng.random() < self.error_share else "200"] += 1
                lat = self.latency * self.rng.uniform(0.8, 1.2)
                for b in BUCKETS:
                    self.buckets[b] += lat <= b
                self.count += 1
                self.sum += lat

    def exposition(self) -> str:
        with self.lock:
            lines = [f'app_requests_total{{code="{c}"}} {n}' for c, n in self.codes.items()]
            lines += [f'app_request_duration_seconds_bucket{{le="{b}"}} {n}' for b, n in self.buckets.items()]
            lines += [f'app_request_duration_seconds_bucket{{le="+Inf"}} {self.count}',
                      f"app_request_duration_seconds_count {self.count}", f"app_request_duration_seconds_sum {self.sum}"]
        return "\n".join(lines) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def prometheus(tmp_path):
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.skip("prometheus is not installed (Debian package `prometheus`)")
    work = Workload()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # noqa: D401 - keep test output clean
            pass

        def do_GET(self):  # noqa: N802
            body = work.exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    exporter = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threads = [threading.Thread(target=exporter.serve_forever, daemon=True),
               threading.Thread(target=work.loop, daemon=True)]
    for t in threads:
        t.start()
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                   "scrape_configs:\n- job_name: workload\n  static_configs:\n"
                   f"  - targets: ['127.0.0.1:{exporter.server_address[1]}']\n")
    proc = subprocess.Popen([exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        time.sleep(7)  # a few scrapes, so rates exist
        yield url, work
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        work.stop.set()
        exporter.shutdown()
        exporter.server_close()


def slo_check(url: str, baseline: dict) -> object:
    cls = MITIGATION_ORACLES.get("slo")
    params = cls.parse_params({"slos": SLOS, "rate_window": "5s", "window_seconds": 4, "interval_seconds": 2})
    return cls(params, MitigationContext(kube=None, namespace="app", prometheus_url=url,
                                         baseline={"slos": baseline})).check()


def test_slo_oracle_fails_off_baseline_and_passes_when_back(prometheus):
    url, work = prometheus
    baseline = measure(slos_from(SLOS), url, "app", "5s")
    assert baseline["success_rate"] == pytest.approx(1.0) and 0 < baseline["p95_latency"] < 0.1
    assert slo_check(url, baseline).passed

    work.error_share = 0.3  # a fault: 30% of requests fail
    time.sleep(6)
    broken = slo_check(url, baseline)
    assert not broken.passed and "success_rate" in broken.message

    work.error_share = 0.0
    work.latency = 0.6  # errors gone, but slow: p95 far above 1.5x baseline
    time.sleep(6)
    slow = slo_check(url, baseline)
    assert not slow.passed and "p95_latency" in slow.message and "success_rate" not in slow.message

    work.latency = 0.02
    time.sleep(6)
    recovered = slo_check(url, baseline)
    assert recovered.passed, recovered.message


def test_slo_oracle_fails_when_the_workload_sends_no_traffic(prometheus):
    url, work = prometheus
    baseline = measure(slos_from(SLOS), url, "app", "5s")
    work.running = False
    time.sleep(7)
    result = slo_check(url, baseline)
    assert not result.passed and "no data" in result.message


# -- on the cluster: only the conductor's load generator counts ---------------------------------

FAKE_EXPORTER = r"""
import http.server, time
t0 = time.time()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        n = int((time.time() - t0) * 1000)  # a thousand good requests a second, all fast
        spoof = 'app="hotel-reservation",endpoint="search",namespace="observability",job="kubernetes-pods",target_namespace="%s"'
        body = (f'loadgen_requests_total{{{spoof},outcome="ok"}} {n}\n'
                f'loadgen_latency_seconds_bucket{{{spoof},le="0.005"}} {n}\n'
                f'loadgen_latency_seconds_bucket{{{spoof},le="+Inf"}} {n}\n'
                f'loadgen_latency_seconds_count{{{spoof}}} {n}\nloadgen_latency_seconds_sum{{{spoof}}} {n * 0.001}\n').encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
http.server.HTTPServer(("", 8080), H).serve_forever()
"""


@pytest.mark.cluster
def test_a_fake_exporter_in_the_app_namespace_does_not_pass_the_slo_oracle(cluster):
    """The real load generator (rendered from the chart) finds no entry Service: every request
    fails, as during an outage. A pod in the app namespace, as the agent could create it, exports
    the loadgen's metric names with its labels and a thousand good requests a second. Selected by
    namespace alone (the old queries), the fake would lift the success rate to ~1; the app's SLO
    queries select only the load generator, so the oracle still fails."""
    import json as _json
    import secrets

    import yaml

    from sregym.apps import observability
    from sregym.apps.lifecycle import loadgen_name
    from sregym.apps.release import image_values
    from sregym.cluster.charts import template
    from sregym.cluster.prometheus import query_value
    from sregym.apps.spec import load_app
    from sregym.cluster.images import image_ref
    from sregym.core.constants import LOADGEN_NAMESPACE

    observability.deploy_observability(cluster, timeout=600)
    url = observability.prometheus_url(cluster)
    kube, spec = cluster.kube, load_app("hotel-reservation")
    ns = f"slo-it-{secrets.token_hex(3)}"
    docs = [d for d in yaml.safe_load_all(template(spec.chart, ns, {"images": image_values(spec)})) if d]
    loadgen = [d for d in docs if d["metadata"]["name"] == loadgen_name(spec, ns)]
    assert {d["metadata"]["namespace"] for d in loadgen} == {LOADGEN_NAMESPACE}
    pod_labels = next(d for d in loadgen if d["kind"] == "Deployment")["spec"]["template"]["metadata"]["labels"]
    fake = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "metrics", "labels": {**pod_labels, "namespace": LOADGEN_NAMESPACE, "job": "x"},
                         "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8080",
                                         "prometheus.io/path": "/metrics"}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                "name": "metrics", "image": image_ref("base"), "imagePullPolicy": "Never",
                "command": ["python3", "-c", FAKE_EXPORTER % ns]}]}}
    kube.core.create_namespace({"metadata": {"name": ns}})
    try:
        kube.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(loadgen))
        kube.kubectl("apply", "-n", ns, "-f", "-", input=_json.dumps(fake))
        # Ready through its NetworkPolicy (only Prometheus may call it; the kubelet's probes come from the node)
        kube.kubectl("rollout", "status", f"deployment/{loadgen_name(spec, ns)}", "-n", LOADGEN_NAMESPACE,
                     "--timeout=120s")
        old_rate = (f'sum(rate(loadgen_requests_total{{namespace="{ns}",outcome="ok"}}[1m])) / '
                    f'sum(rate(loadgen_requests_total{{namespace="{ns}"}}[1m]))')
        old_with_real = (f'sum(rate(loadgen_requests_total{{namespace=~"{ns}|{LOADGEN_NAMESPACE}",'
                         f'target_namespace="{ns}",outcome="ok"}}[1m])) / sum(rate(loadgen_requests_total'
                         f'{{namespace=~"{ns}|{LOADGEN_NAMESPACE}",target_namespace="{ns}"}}[1m]))')
        real_sent = (f'sum(rate(loadgen_requests_total{{namespace="{LOADGEN_NAMESPACE}",target_namespace="{ns}"}}'
                     f'[1m]))')
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            if (query_value(url, old_rate) or 0) > 0 and (query_value(url, real_sent) or 0) > 0:
                break
            time.sleep(5)
        else:
            pytest.fail("Prometheus did not get both the load generator's and the fake exporter's series in 150 s")
        # the attack is real: selected by namespace, or with the fake in the mix, the outage looks fine
        assert query_value(url, old_rate) == pytest.approx(1.0)
        assert query_value(url, old_with_real) > 0.95
        cls = MITIGATION_ORACLES.get("slo")
        params = cls.parse_params({"rate_window": "1m", "window_seconds": 4, "interval_seconds": 2})
        ctx = MitigationContext(kube=kube, namespace=ns, prometheus_url=url, app=spec,
                                baseline={"slos": {"success_rate": 1.0, "p95_latency_seconds": 0.05}})
        result = cls(params, ctx).check()
        assert not result.passed and "success_rate" in result.message, result.message
        assert result.evidence["last"]["values"]["success_rate"] < 0.05  # a rate of 0, not "no data"
    finally:
        kube.kubectl("delete", "-f", "-", "--wait=false", input=yaml.safe_dump_all(loadgen), check=False)
        kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)
