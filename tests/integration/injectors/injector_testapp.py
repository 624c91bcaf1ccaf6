"""A small test app for the primitives' cluster tests: a Python HTTP server (on the sregym/base
image) whose endpoints exercise what faults break: its env, a config file, reads of a data file
on its volume, name resolution, a peer service, a large download."""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest

from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.injectors import INJECTORS, FaultContext, Verification
from sregym.core.problem import Selector
from polling import eventually

IMAGE = "sregym/base:bookworm"
SERVER = r"""
import http.server, json, os, socket, urllib.parse, urllib.request
DATA = '/data/blob'
if not os.path.exists(DATA):
    with open(DATA, 'wb') as f:
        for i in range(16):
            f.write(bytes([i]) * 4096)
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, code, body):
        b = body.encode() if isinstance(body, str) else body
        self.send_response(code); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        u = urllib.parse.urlparse(self.path); q = dict(urllib.parse.parse_qsl(u.query))
        try:
            if u.path == '/env':
                return self.reply(200, json.dumps(dict(os.environ)))
            if u.path == '/config':
                return self.reply(200, open('/config/' + q['key']).read())
            if u.path == '/read':
                fd = os.open(DATA, os.O_RDONLY)
                try:
                    return self.reply(200, os.pread(fd, 4096, int(q['block']) * 4096)[:1].hex())
                finally:
                    os.close(fd)
            if u.path == '/fsync':
                fd = os.open('/data/journal', os.O_WRONLY | os.O_CREAT); os.write(fd, b'x'); os.fsync(fd); os.close(fd)
                return self.reply(200, 'synced')
            if u.path == '/write':
                path = '/data/upload.tmp'
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.write(fd, b'y' * int(q.get('bytes', 1 << 20))); os.fsync(fd); os.close(fd)
                finally:
                    if os.path.exists(path):
                        os.unlink(path)
                return self.reply(200, 'written')
            if u.path == '/dns':
                return self.reply(200, socket.gethostbyname(q['name']))
            if u.path == '/peer':
                return self.reply(200, urllib.request.urlopen('http://' + q['name'] + ':8080/', timeout=3).read())
            if u.path == '/big':
                return self.reply(200, b'x' * int(q.get('bytes', 1 << 20)))
            return self.reply(200, 'ok')
        except OSError as e:
            return self.reply(500, f'errno {e.errno}: {e.strerror}')
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('', 8080), H).serve_forever()
"""


def manifests(ns: str, name: str, *, replicas: int = 1, env: dict[str, str] | None = None) -> list[dict]:
    labels = {"app": name}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config", "namespace": ns},
         "data": {"server.py": SERVER, "mode": "normal"}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": f"{name}-reader", "namespace": ns},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{name}-reader", "namespace": ns},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{name}-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns, "labels": labels},
         "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                  "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "serviceAccountName": name, "terminationGracePeriodSeconds": 1,
                      "containers": [{
                          "name": "web", "image": IMAGE, "imagePullPolicy": "Never",
                          "command": ["python3", "/config/server.py"],
                          "env": [{"name": k, "value": v} for k, v in (env or {"GREETING": "hello"}).items()],
                          "ports": [{"name": "http", "containerPort": 8080}],
                          "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
                          "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 2},
                          "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                           {"name": "config", "mountPath": "/config"}]}],
                      "volumes": [{"name": "data", "emptyDir": {}},
                                  {"name": "config", "configMap": {"name": f"{name}-config"}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns, "labels": labels},
         "spec": {"selector": labels, "ports": [{"name": "http", "port": 8080, "targetPort": "http"}]}},
    ]


def ready_pods(kube: Any, ns: str, app: str) -> list[dict]:
    """The test app's pods of ``app`` that are Ready and not terminating."""
    from sregym.injectors._objects import list_objects

    return [p for p in list_objects(kube, "Pod", ns, {"app": app})
            if not p["metadata"].get("deletionTimestamp") and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]


def base_image_present(kube: Any) -> bool:
    """Whether the test app's image is on a node (``sregym images build`` puts it there)."""
    return any(IMAGE in (n or "") for node in kube.core.list_node().items
               for img in node.status.images or [] for n in img.names or [])


def deploy_test_app(kube: Any, ns: str) -> None:
    """A fresh namespace ``ns`` (one left by a session cut off mid-fault is deleted first) with the
    test app's web and peer, ready; skips the test when the image is missing."""
    from sregym.injectors._objects import create_object

    if not base_image_present(kube):
        pytest.skip(f"the {IMAGE} image is not on the node (run `sregym images build`)")
    delete_namespace(kube, ns)
    create_object(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    create_object(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HIDDEN_NAMESPACE}})
    for m in manifests(ns, "web") + manifests(ns, "peer"):
        create_object(kube, m)
    wait_until(lambda: ready_pods(kube, ns, "web") and ready_pods(kube, ns, "peer"), 180, 2, "test app ready")


def delete_namespace(kube: Any, ns: str, wait: bool = True) -> None:
    """Delete ``ns``; with ``wait``, until it is gone. A module's teardown need not wait (10-12 s of
    pods terminating): the next ``deploy_test_app`` in that namespace does."""
    from sregym.injectors._objects import delete_object, get_object

    delete_object(kube, "Namespace", ns, None)
    if wait:
        wait_until(lambda: get_object(kube, "Namespace", ns, None) is None, 180, 2, f"namespace {ns} to go")


def get(url: str, timeout: float = 3) -> tuple[int, str]:
    """(status, body) of a GET; status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, ValueError) as e:
        return 0, str(e)


def wait_until(check, timeout: float = 90, interval: float = 1.0, what: str = "condition") -> Any:
    return eventually(check, timeout, interval, what)


@dataclass
class Cycle:
    """One primitive's lifecycle as the conductor runs it (plan -> journal -> inject -> verify ->
    recover), with the journal round trip through JSON."""

    injector: Any
    state: Any  # as the injector takes it: its State model, or a dict

    def verify(self, timeout: float = 120) -> Verification:
        last: list[Verification] = []

        def check():
            last[:] = [self.injector.verify(self.state)]
            return last[0].ok

        try:
            wait_until(check, timeout, 2, f"{self.injector.name} to take effect")
        except pytest.fail.Exception:  # eventually's failure (not an AssertionError): say what verify saw
            raise AssertionError(f"verify never said yes: {last[0].detail if last else '-'}") from None
        return last[0]

    def recover(self) -> None:
        self.injector.recover(self.state)


STARTED: list[Cycle] = []  # every cycle a test started; recovered after the test even if it failed


@pytest.fixture(autouse=True)
def recover_leftovers():
    """A failed assertion must not leave its fault behind for the next test (recover is idempotent).
    A test module takes it with ``from injector_testapp import recover_leftovers``."""
    yield
    while STARTED:
        STARTED.pop().recover()


def start(ctx: FaultContext, name: str, params: dict, target: Selector, mechanism: str | None = None,
          node: str | None = None) -> Cycle:
    cls = INJECTORS.get(name)
    p = cls.parse_params(params)
    cls.check_target(target)
    caps = ctx.node_capabilities(node) if node else {}
    mech = cls.choose_mechanism(caps, mechanism) if (node or mechanism) else cls.mechanisms[0]
    inj = cls(p, target, ctx, mech)
    # what the journal holds, rebuilt as the fault plane and `sregym cleanup` rebuild it
    state = inj.load_state(json.loads(json.dumps(inj.dump_state(inj.plan()))))
    cycle = Cycle(inj, state)
    STARTED.append(cycle)
    inj.inject(state)
    return cycle


def context(cluster: Any, ns: str, caps: Any, seed: int = 1) -> FaultContext:
    return FaultContext(kube=cluster.kube, app_namespace=ns, hidden_namespace=HIDDEN_NAMESPACE, seed=seed,
                        node_capabilities=caps)


def timed(url: str, timeout: float = 60) -> float:
    """Seconds one successful GET of ``url`` takes."""
    t = time.monotonic()
    status, _ = get(url, timeout=timeout)
    assert status == 200
    return time.monotonic() - t


def check_added_latency(ctx: Any, url: str, target: Selector, node: str) -> "Cycle":
    """300 ms of latency on ``target``: every request slower while injected, fast again after."""
    assert timed(url) < 0.2
    c = start(ctx, "network_latency", {"delay_ms": 300}, target, node=node)
    assert c.injector.mechanism.name in ("netem", "nfqueue-delay")
    assert timed(url) > 0.3
    c.verify()
    c.recover()
    assert timed(url) < 0.2
    c.recover()
    return c


# A run that injects one fault through the fault plane (journaled as a run does), says "injected"
# and waits to be killed: what `sregym cleanup` must recover after.
_RUN_AND_WAIT = r"""
import anyio, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from sregym.cluster.providers import ExistingCluster
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.journal import Journal, RunHeader
from sregym.core.problem import Selector

kubeconfig, context, journal_dir, ns, injector, params, target = (sys.argv[2], sys.argv[3] or None,
                                                                   Path(sys.argv[4]), *sys.argv[5:9])
cluster = ExistingCluster(Path(kubeconfig), context).up()

async def main():
    journal = Journal("k" + time.strftime("%H%M%S"), journal_dir)
    journal.start(RunHeader(run_id=journal.run_id, problem_id="killed_run", kubeconfig=kubeconfig, context=context))
    plane = FaultPlane(journal=journal, kube=cluster.kube, app_namespace=ns, run_id=journal.run_id, run_seed=0,
                       capabilities=lambda node: {})
    await plane.start(key="killed", kind="fault", injector=injector, params=json.loads(params),
                      target=Selector.model_validate_json(target))
    print("injected", flush=True)
    await anyio.sleep(3600)

anyio.run(main)
"""


def killed_run(cluster: Any, journal_dir: Any, ns: str, injector: str, params: dict, target: Selector,
               while_injected: Any = lambda: None) -> list:
    """Inject one fault in another process, call ``while_injected()``, SIGKILL the process (nothing
    recovered), then run `sregym cleanup`'s recovery; returns its results."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from sregym.conductor.cleanup import cleanup_all

    repo = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-c", _RUN_AND_WAIT, str(repo), str(cluster.kubeconfig),
                             cluster.context or "", str(journal_dir), ns, injector, json.dumps(params),
                             target.model_dump_json()],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == "injected", line + proc.stdout.read()
        while_injected()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the run dies mid-fault, nothing recovered
        proc.wait()
        # even when a check above failed: the killed run's fault must not outlive the test
        results = cleanup_all(lambda header: cluster.kube, directory=journal_dir)
    return results
