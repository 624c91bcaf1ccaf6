"""The agent's API proxy: its Go tests, and the launcher against a stand-in API server (the real
proxy binary, built from the repository; the live tests are in tests/integration/agentplane)."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
import yaml

from sregym.cluster.agent_proxy import AgentApiProxy
from sregym.cluster.binaries import AGENT_PROXY_SOURCE, agent_proxy_binary, agent_proxy_go_env
from sregym.cluster.pki import ClusterPKI
from procfs import ended

pytestmark = pytest.mark.skipif(shutil.which("go") is None, reason="Go builds the proxy (scripts/install.sh installs it)")


def test_go_tests_of_the_filter_and_handler_pass() -> None:
    proc = subprocess.run(["go", "test", "-count=1", "./..."], cwd=AGENT_PROXY_SOURCE, capture_output=True, text=True,
                          env=agent_proxy_go_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_binary_is_keyed_by_its_sources(tmp_path) -> None:
    copy = tmp_path / "agentproxy"
    shutil.copytree(AGENT_PROXY_SOURCE, copy)
    assert agent_proxy_binary(copy) == agent_proxy_binary()
    (copy / "main.go").write_text((copy / "main.go").read_text() + "\n// changed\n")
    assert agent_proxy_binary(copy) != agent_proxy_binary()
    (copy / "extra_test.go").write_text("package main\n")  # tests do not change the binary
    assert agent_proxy_binary(copy) == agent_proxy_binary(copy)
    before = agent_proxy_binary(copy)
    (copy / "go.sum").write_text((copy / "go.sum").read_text() + "\n")  # the pinned dependencies do
    assert agent_proxy_binary(copy) != before


def test_the_proxys_dependencies_are_pinned_and_packaged() -> None:
    """The PromQL parser is the version of the Prometheus the view serves, checked against go.sum."""
    import tomllib

    gomod = (AGENT_PROXY_SOURCE / "go.mod").read_text()
    assert "github.com/prometheus/prometheus v0.42.0" in gomod  # Debian bookworm's Prometheus 2.42.0
    assert "github.com/prometheus/prometheus v0.42.0 h1:" in (AGENT_PROXY_SOURCE / "go.sum").read_text()
    assert "-mod=readonly" in agent_proxy_go_env()["GOFLAGS"]
    package_data = tomllib.loads((AGENT_PROXY_SOURCE.parents[2] / "pyproject.toml").read_text())
    assert "agentproxy/go.sum" in package_data["tool"]["setuptools"]["package-data"]["sregym.cluster"]


class StandInAPI(BaseHTTPRequestHandler):
    """Records each request's headers and answers with a pod list that includes a hidden pod."""

    seen: list[dict[str, list[str]]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        StandInAPI.seen.append({k.lower(): self.headers.get_all(k) for k in self.headers.keys()})
        body = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": [
            {"metadata": {"name": "web", "namespace": "shop"}},
            {"metadata": {"name": "helper", "namespace": "node-ops"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def stand_in():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandInAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    StandInAPI.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _kube(host: str):
    """What the launcher reads of an admin client: the server and the admin's bearer token."""
    cfg = SimpleNamespace(host=host, ssl_ca_cert=None, verify_ssl=True, cert_file=None, key_file=None,
                          api_key={"authorization": "Bearer admin-secret-token"})
    return SimpleNamespace(api_client=SimpleNamespace(configuration=cfg))


def _get(proxy: AgentApiProxy, token: str) -> tuple[int, dict]:
    ctx = ssl.create_default_context(cadata=proxy.ca_data.decode())
    request = urllib.request.Request(f"{proxy.url}/api/v1/pods", headers={
        "Authorization": f"Bearer {token}", "Impersonate-User": "system:admin"})
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=10) as response:  # noqa: S310 - our proxy
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, {}


def test_launcher_serves_the_agent_as_its_service_account_and_stops_by_pid(stand_in, tmp_path) -> None:
    pki = ClusterPKI(tmp_path / "pki")
    pki.ensure_ca()

    async def go():
        async with AgentApiProxy(_kube(stand_in), "shop", pki=pki) as proxy:
            pid, kubeconfig = proxy.pid, proxy.kubeconfig
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
            doc = yaml.safe_load(kubeconfig.read_text())
            mode = kubeconfig.stat().st_mode & 0o777
            ok = await anyio.to_thread.run_sync(_get, proxy, proxy.token)
            wrong = await anyio.to_thread.run_sync(_get, proxy, "admin-secret-token")
            return pid, kubeconfig, cmdline, doc, mode, ok, wrong, proxy.token, proxy.url

    pid, kubeconfig, cmdline, doc, mode, ok, wrong, token, url = anyio.run(go)
    assert ok[0] == 200 and [i["metadata"]["name"] for i in ok[1]["items"]] == ["web"]
    assert wrong[0] == 401
    sent = StandInAPI.seen[0]
    assert sent["impersonate-user"] == ["system:serviceaccount:shop:sre-oncall"]
    assert sent["impersonate-group"] == ["system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"]
    assert sent["authorization"] == ["Bearer admin-secret-token"] and len(StandInAPI.seen) == 1
    assert token not in cmdline and "admin-secret-token" not in cmdline  # secrets go through stdin
    assert mode == 0o600 and doc["clusters"][0]["cluster"]["server"] == url
    assert doc["users"][0]["user"] == {"token": token}
    assert ended(pid)
    assert not kubeconfig.exists()  # the private folder went with the proxy


def test_a_bad_listen_address_is_one_clear_error(stand_in, tmp_path) -> None:
    from sregym.core.errors import PrerequisiteError

    pki = ClusterPKI(tmp_path / "pki")
    pki.ensure_ca()
    with pytest.raises(PrerequisiteError, match="did not start on 192.0.2.1"):
        AgentApiProxy(_kube(stand_in), "shop", pki=pki, listen_host="192.0.2.1").start()


class StandInPrometheus(BaseHTTPRequestHandler):
    """Answers every query with one visible and one hidden series (and the view's own question for
    the label names it must seal with the names those series carry)."""

    def _answer(self) -> None:
        if self.path == "/api/v1/labels":
            body = json.dumps({"status": "success", "data": ["__name__", "namespace", "pod"]}).encode()
        else:
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"namespace": "shop", "pod": "web"}, "value": [1, "1"]},
                {"metric": {"namespace": "node-ops", "pod": "helper"}, "value": [1, "1"]}]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


def test_prometheus_view_serves_only_queries_without_the_hidden_namespace() -> None:
    from sregym.cluster.agent_proxy import PrometheusView

    server = ThreadingHTTPServer(("127.0.0.1", 0), StandInPrometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with PrometheusView(f"http://127.0.0.1:{server.server_address[1]}") as view:
            with urllib.request.urlopen(f"{view.url}/api/v1/query?query=up", timeout=10) as r:  # noqa: S310
                series = json.loads(r.read())["data"]["result"]
            posted = urllib.request.Request(f"{view.url}/api/v1/query", data=b"query=up", method="POST")
            with urllib.request.urlopen(posted, timeout=10) as r:  # noqa: S310
                assert len(json.loads(r.read())["data"]["result"]) == 1
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{view.url}/api/v1/targets?state=dropped", timeout=10)  # noqa: S310
    finally:
        server.shutdown()
    assert [s["metric"]["pod"] for s in series] == ["web"]
    assert refused.value.code == 404


def test_cleanup_stops_a_killed_runs_proxy_by_its_journaled_pid(tmp_path) -> None:
    from sregym.cluster.agent_proxy import PROCESS_NAME, PrometheusView
    from sregym.conductor.cleanup import cleanup_all
    from sregym.conductor.journal import Journal, RunHeader

    view = PrometheusView("http://127.0.0.1:9")  # never asked: nothing is sent upstream
    view.start()
    try:
        journal = Journal("r-proxy", tmp_path)
        journal.start(RunHeader(run_id="r-proxy", problem_id="p", pid=999_999_999))
        journal.process(view.pid, PROCESS_NAME)  # as run_agent's on_server does
        [result] = cleanup_all(lambda header: None, directory=tmp_path)
        assert result.stopped == [f"{PROCESS_NAME} ({view.pid})"] and result.closed
        assert view._proc.wait(timeout=10) == -9
    finally:
        view.stop()


def test_a_proxy_does_not_outlive_the_process_that_started_it(tmp_path) -> None:
    """A test fixture or conductor killed with SIGKILL never reaches ``stop``; its proxies belong to
    no journaled run, so ``sregym cleanup`` cannot find them (two ran on for 2 h 19 min once)."""
    import os
    import signal
    import sys
    import time

    starter = subprocess.Popen([sys.executable, "-c",
                                "from sregym.cluster.agent_proxy import PrometheusView\n"
                                "v = PrometheusView('http://127.0.0.1:9').start()\n"
                                "print(v.pid, flush=True)\n"
                                "import time; time.sleep(600)\n"],
                               stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[3])
    try:
        proxy_pid = int(starter.stdout.readline())
        os.kill(proxy_pid, 0)  # running while its starter is
        starter.kill()
        starter.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(proxy_pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(proxy_pid, signal.SIGKILL)
            pytest.fail(f"the proxy {proxy_pid} kept running after its starter was killed")
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
