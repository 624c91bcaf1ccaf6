"""The metrics tool's query against a real Prometheus (Debian's), started on loopback by the test."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from sregym.agentplane.observability import QueryError, query_metrics


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_prometheus(exe: str, work: Path, log) -> tuple[subprocess.Popen, str] | None:
    """Prometheus on a free loopback port, once it has scraped itself; None when it exited first
    (its port was taken between choosing it and binding it: seen once in CI, where the first
    answer on that port was not Prometheus's)."""
    port = free_port()
    (work / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"scrape_configs: [{{job_name: self, static_configs: [{{targets: ['127.0.0.1:{port}']}}]}}]\n")
    proc = subprocess.Popen([exe, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            body = httpx.get(f"{url}/api/v1/query", params={"query": "up"}, timeout=2).json()
            if body.get("data", {}).get("result"):
                return proc, url
        except (httpx.HTTPError, ValueError):  # not up yet, or not Prometheus answering
            pass
        time.sleep(0.5)
    stop(proc)
    return None


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory):
    exe = shutil.which("prometheus")
    if exe is None:
        pytest.fail("prometheus is not installed (Debian package `prometheus`, listed in .ci/apt-packages.txt)")
    work: Path = tmp_path_factory.mktemp("prometheus")
    with open(work / "prometheus.log", "wb") as log:
        started = None
        for _ in range(3):  # a port taken under it: another free port
            started = start_prometheus(exe, work, log)
            if started:
                break
        if started is None:
            pytest.fail(f"prometheus did not scrape itself within 60 s, 3 tries; see {work / 'prometheus.log'}")
        proc, url = started
        try:
            time.sleep(3)  # a few samples for the range query
            yield url
        finally:
            stop(proc)


def test_instant_query_returns_series_with_labels(prometheus: str) -> None:
    out = query_metrics(prometheus, 'up{job="self"}')
    assert out["result_type"] == "vector" and not out["truncated"]
    assert out["series"][0]["metric"]["job"] == "self" and out["series"][0]["value"][1] == "1"


def test_range_query_returns_points_within_the_window(prometheus: str) -> None:
    out = query_metrics(prometheus, "up", start="now-30s", end="now", step="1s")
    assert out["result_type"] == "matrix"
    values = out["series"][0]["values"]
    assert len(values) >= 3 and all(v[1] == "1" for v in values)
    assert values[-1][0] - values[0][0] <= 30


def test_scalar_results_and_bad_promql_are_reported(prometheus: str) -> None:
    assert query_metrics(prometheus, "1 + 1")["value"][1] == "2"
    with pytest.raises(QueryError, match="bad_data|parse"):
        query_metrics(prometheus, "sum(rate(up[")
    with pytest.raises(QueryError, match="end must be after start"):
        query_metrics(prometheus, "up", start="now", end="now-5m")
