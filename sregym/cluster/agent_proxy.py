"""The agent's only Kubernetes API endpoint: a reverse proxy that pins the agent's identity and
hides the fault plane.

::

    grant_agent_access(kube, "hotel")
    async with AgentApiProxy(kube, "hotel", listen_host=proxy_listen_host(cluster)) as proxy:
        proxy.write_kubeconfig(path)   # or proxy.kubeconfig, written on start
        ...                            # the agent uses that kubeconfig

The proxy (Go, ``sregym/cluster/agentproxy``, built once and cached by a hash of its sources)
accepts only a per-run random token, drops whatever credentials or ``Impersonate-*`` headers the
client sends, and forwards with the conductor's credentials while impersonating the agent's
ServiceAccount: the agent acts with exactly that account's RBAC and holds no credential the API
server accepts. Requests under a hidden namespace are sent to a namespace that does not exist, so
the API server answers as for any missing namespace; lists, Tables, watch streams and events lose
every object of the hidden namespace. The process runs in its own session and is stopped by PID.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import signal
import subprocess
import shutil
import threading
from pathlib import Path
from typing import Any

import anyio.to_thread

from sregym.cluster.agent_access import DEFAULT_NAME, agent_identity, write_kubeconfig
from sregym.cluster.binaries import build_agent_proxy
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.kube import Kube
from sregym.cluster.pki import ClusterPKI
from sregym.cluster.scratch import make_scratch_dir
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.errors import ClusterError, PrerequisiteError

READY_PREFIX = "AGENTPROXY_READY "
# What the run journal records for the proxy's PID; cleanup stops a PID only when its command
# line still contains this (the binary's name).
PROCESS_NAME = "agentproxy"
STARTUP_TIMEOUT = 30.0


def proxy_listen_host(cluster: ClusterHandle) -> str:
    """An address both this host and the cluster's pods reach: the local cluster's node IP (the
    gateway of its pod bridge); for another provider, a node's InternalIP that is an address of this
    host (e.g. the local cluster reached as ``existing`` by its kubeconfig); else loopback, which
    pods cannot reach (the sandbox then refuses with a message saying so)."""
    if cluster.provider == "local":
        from sregym.cluster.local.config import LocalNetwork

        return LocalNetwork().node_ip
    return node_address_on_this_host(cluster.kube) or "127.0.0.1"


def node_address_on_this_host(kube: Kube) -> str | None:
    """A node's InternalIP that is one of this host's addresses (it binds), or None."""
    try:
        nodes = kube.core.list_node().items
    except Exception:  # noqa: BLE001 - unreachable or forbidden: no such address is known
        return None
    for node in nodes:
        for address in node.status.addresses or []:
            if address.type != "InternalIP":
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind((address.address, 0))  # only an address of this host binds
                except OSError:
                    continue
                return address.address
    return None


def proxy_pki(cluster: ClusterHandle | None) -> ClusterPKI:
    """The CA that signs the proxy's serving certificate: the local cluster's own (pods already
    trust it through ``kube-root-ca.crt``), else a CA of the proxy's own under the state root."""
    if cluster is not None and cluster.provider == "local" and cluster.data_dir is not None:
        pki = ClusterPKI(Path(cluster.data_dir) / "pki")
        if pki.exists():
            return pki
    from sregym.cluster.local.paths import state_root

    pki = ClusterPKI(state_root() / "agent-proxy" / "pki")
    pki.ensure_ca()
    return pki


class _ProxyProcess:
    """One run of the proxy binary: started in its own session, ready when it prints its URL,
    stopped by PID. Subclasses say how it is invoked (``_command``) and what follows (``_opened``)."""

    what = "the agent's API proxy"

    def __init__(self, listen_host: str, port: int, log_path: Path | None) -> None:
        self.listen_host, self.port, self.log_path = listen_host, port, log_path
        self.url: str | None = None
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None

    def _command(self, binary: Path, work: Path) -> tuple[list[str], bytes]:
        raise NotImplementedError

    def _opened(self, work: Path) -> None:
        """Called once the proxy listens."""

    def start(self):
        """Build (once) and start the proxy, wait until it listens."""
        binary = build_agent_proxy(log=lambda m: None)
        self._workdir = work = make_scratch_dir("sregym-agentproxy-")  # 0700; swept by cleanup if we are killed
        try:
            argv, stdin = self._command(binary, work)
            argv += ["-exit-with-parent", str(os.getpid())]  # never outlives us, even SIGKILLed
            log = open(self.log_path or work / "agentproxy.log", "ab")
            try:
                self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                              cwd=work, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                                              start_new_session=True)
            finally:
                log.close()
            self.pid = self._proc.pid
            assert self._proc.stdin is not None
            self._proc.stdin.write(stdin)
            self._proc.stdin.close()
            self.url = self._wait_ready()
            self._opened(work)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        stdout, line = self._proc.stdout, []
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(STARTUP_TIMEOUT)
        text = line[0].decode(errors="replace").strip() if line else ""
        if not text.startswith(READY_PREFIX.strip()):
            log = self.log_path or (self._workdir / "agentproxy.log" if self._workdir else None)
            detail = log.read_text(errors="replace").strip()[-800:] if log is not None and log.is_file() else ""
            raise PrerequisiteError(f"{self.what} did not start on {self.listen_host}"
                                    + (f": {detail}" if detail else f" within {STARTUP_TIMEOUT:g}s"),
                                    hint="check that the address belongs to this host")
        return text[len(READY_PREFIX):].strip()

    def stop(self) -> None:
        """Stop the proxy by its PID (its own process group) and remove its private folder. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(5)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
        self.url = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    async def __aenter__(self):
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(self, *exc: Any) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.stop)


class AgentApiProxy(_ProxyProcess):
    """Runs the agent's API proxy for ``namespace``'s ServiceAccount; usable with ``with`` or
    ``async with``. While open: ``url``, ``ca_data`` (PEM), ``token``, ``pid`` and ``kubeconfig``
    (a kubeconfig for the agent, mode 0600, in a private temporary folder unless
    ``kubeconfig_path`` is given)."""

    def __init__(self, kube: Kube, namespace: str, *, listen_host: str = "127.0.0.1", port: int = 0,
                 hidden_namespaces: tuple[str, ...] = (HIDDEN_NAMESPACE,), service_account: str = DEFAULT_NAME,
                 pki: ClusterPKI | None = None, kubeconfig_path: Path | None = None,
                 log_path: Path | None = None) -> None:
        super().__init__(listen_host, port, log_path)
        self.kube, self.namespace = kube, namespace
        self.hidden_namespaces = hidden_namespaces
        self.user, self.groups = agent_identity(namespace, service_account)
        self.service_account = service_account
        self._pki = pki
        self._kubeconfig_path = kubeconfig_path
        self.token = secrets.token_urlsafe(32)
        self.ca_data: bytes = b""
        self.kubeconfig: Path | None = None

    def _opened(self, work: Path) -> None:
        self.kubeconfig = self.write_kubeconfig(self._kubeconfig_path or work / "agent.kubeconfig")

    def _command(self, binary: Path, work: Path) -> tuple[list[str], bytes]:
        cfg = self.kube.api_client.configuration
        pki = self._pki or proxy_pki(None)
        serving = pki.issue(f"agent-proxy-{self.listen_host}", "sregym-agent-proxy", server=True, client=False,
                            ips=(self.listen_host,), dns=("localhost",))
        self.ca_data = pki.ca.cert.read_bytes()
        argv = [str(binary), "-listen", f"{self.listen_host}:{self.port}", "-tls-cert", str(serving.cert),
                "-tls-key", str(serving.key), "-upstream", cfg.host, "-as-user", self.user]
        for group in self.groups:
            argv += ["-as-group", group]
        for ns in self.hidden_namespaces:
            argv += ["-hide-namespace", ns]
        if cfg.ssl_ca_cert:
            argv += ["-upstream-ca", cfg.ssl_ca_cert]
        elif not cfg.verify_ssl:
            argv += ["-upstream-insecure"]
        if cfg.cert_file and cfg.key_file:
            # the client loader keeps these in temporary files that live as long as this process;
            # copies in the private work folder outlive any reload
            for name, src in (("upstream.crt", cfg.cert_file), ("upstream.key", cfg.key_file)):
                dst = work / name
                dst.write_bytes(Path(src).read_bytes())
                dst.chmod(0o600)
            argv += ["-upstream-cert", str(work / "upstream.crt"), "-upstream-key", str(work / "upstream.key")]
        bearer = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken") or ""
        upstream_token = bearer.split(" ", 1)[1] if bearer.lower().startswith("bearer ") else bearer
        stdin = json.dumps({"token": self.token, "upstream_token": upstream_token}).encode() + b"\n"
        return argv, stdin

    def write_kubeconfig(self, path: Path) -> Path:
        """Write a kubeconfig for the agent (the proxy's URL, CA and token; mode 0600)."""
        if self.url is None:
            raise ClusterError("the agent's API proxy is not running")
        return write_kubeconfig(Path(path), self, self.namespace, user=self.service_account)


class PrometheusView(_ProxyProcess):
    """The agent's view of Prometheus (plain HTTP, no credentials involved): only the query API
    (query, query_range, series, labels, label values, metadata), with every series whose labels
    name a hidden namespace removed. Targets, status, admin, federation, rules and alerts are not
    served. While open: ``url`` (a Prometheus base URL) and ``pid``."""

    what = "the agent's Prometheus view"

    def __init__(self, prometheus_url: str, *, listen_host: str = "127.0.0.1", port: int = 0,
                 hidden_namespaces: tuple[str, ...] = (HIDDEN_NAMESPACE,), log_path: Path | None = None) -> None:
        super().__init__(listen_host, port, log_path)
        self.prometheus_url = prometheus_url
        self.hidden_namespaces = hidden_namespaces

    def _command(self, binary: Path, work: Path) -> tuple[list[str], bytes]:
        argv = [str(binary), "-listen", f"{self.listen_host}:{self.port}", "-prometheus", self.prometheus_url]
        for ns in self.hidden_namespaces:
            argv += ["-hide-namespace", ns]
        return argv, b""
