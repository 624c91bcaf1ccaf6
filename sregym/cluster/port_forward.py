"""``kubectl port-forward`` to a Service, on this host's loopback, stopped by PID.

::

    forward = PortForward(cluster, "observability", "prometheus", 9090)
    forward.start()            # waits for kubectl's "Forwarding from 127.0.0.1:PORT"
    forward.url                # http://127.0.0.1:PORT
    forward.stop()

The connection goes through the API server and the kubelet into the pod's own network namespace
and is dialled there on ``localhost``: no pod network and no NetworkPolicy is on that path (the
policy engine's rules live in the node's namespace), so a forward reaches a fenced pod. kubectl
forwards to one pod behind the Service, chosen at start; when that pod goes away kubectl exits,
and :meth:`PortForward.alive` says so (start it again: it asks for the same port first).
Each kubectl is recorded as soon as it is started (:mod:`sregym.cluster.owned_processes`), so when
the sregym process that owns it is killed, ``sregym cleanup`` stops it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time

from sregym.cluster.handle import ClusterHandle
from sregym.cluster import owned_processes
from sregym.cluster.kube import kubectl_path
from sregym.core.errors import ClusterError

LISTEN_HOST = "127.0.0.1"  # never another address: only this host's processes may use a forward
START_TIMEOUT = 20.0
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) ->")


class PortForward:
    """One ``kubectl port-forward svc/<service> <port>`` process on 127.0.0.1."""

    def __init__(self, cluster: ClusterHandle, namespace: str, service: str, service_port: int) -> None:
        self.cluster, self.namespace, self.service, self.service_port = cluster, namespace, service, service_port
        self.port = 0  # the local port; 0 until started, then kept so a restart asks for it again
        self.pid: int | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._identity: owned_processes.ProcessIdentity | None = None

    @property
    def url(self) -> str:
        return f"http://{LISTEN_HOST}:{self.port}"

    def argv(self, port: int) -> list[str]:
        argv = [kubectl_path(), "--kubeconfig", str(self.cluster.kubeconfig)]
        if self.cluster.context:
            argv += ["--context", self.cluster.context]
        return argv + ["-n", self.namespace, "port-forward", "--address", LISTEN_HOST,
                       f"svc/{self.service}", f"{port or ''}:{self.service_port}"]

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = START_TIMEOUT) -> str:
        """Start (or restart) the forward and return its URL once kubectl listens."""
        self.stop()
        try:
            return self._start(self.port, timeout)
        except ClusterError:
            if not self.port:
                raise
            return self._start(0, timeout)  # the old port was taken meanwhile: any free one

    def _start(self, port: int, timeout: float) -> str:
        # its own session: a Ctrl-C at the terminal reaches sregym, which stops it after the run's
        # recovery (which may still query the stack), rather than killing it first
        proc = subprocess.Popen(self.argv(port), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        self._proc, self.pid = proc, proc.pid
        try:  # before waiting on it: from here on a killed sregym leaves nothing cleanup cannot stop
            self._identity = owned_processes.record(proc.pid, f"kubectl port-forward svc/{self.service} "
                                                    f"-n {self.namespace}")
        except Exception:
            self.stop()
            raise
        lines: list[str] = []
        found = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:  # keep draining, so kubectl never blocks on a full pipe
                if not found.is_set():
                    lines.append(line.strip())
                    match = _FORWARDING.search(line)
                    if match:
                        self.port = int(match.group(1))
                        found.set()

        threading.Thread(target=read, name=f"port-forward {self.service}", daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                said = "; ".join(x for x in lines if x)[-400:] or "no output"
                raise ClusterError(f"kubectl port-forward to svc/{self.service} in namespace {self.namespace} did not "
                                   f"start within {timeout:.0f}s: {said}",
                                   hint=f"kubectl -n {self.namespace} get pods,endpoints")
        now = owned_processes.ProcessIdentity.of(proc.pid)
        if now is not None and now != self._identity:  # a kubectl wrapper exec'd the real one: same pid and start
            self._identity = owned_processes.record(proc.pid, f"kubectl port-forward svc/{self.service} "
                                                    f"-n {self.namespace}")
        return self.url

    def stop(self) -> None:
        """Stop the process by its PID (and its session, which is its own) and reap it."""
        proc, self._proc = self._proc, None
        identity, self._identity = self._identity, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        else:
            proc.wait()
        if identity is not None:
            owned_processes.forget(identity)
