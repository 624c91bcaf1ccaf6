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
from sregym.oracles.slos import slos_from

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
