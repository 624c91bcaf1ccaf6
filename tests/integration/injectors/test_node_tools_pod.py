"""Node-level primitives through the node-tools pod, the way they run on kind or an existing
cluster (where the node is not this host): a privileged pod in the hidden namespace with the
node's root at /host. On the local cluster sregym would use this host directly, so the runner is
forced to the pod here, and each primitive is checked end to end: inject, the effect from the
outside, recover, the effect gone: pause, bad blocks, packet loss, ptrace syscall failures, netem
latency, stress in the target's cgroups, and the node-level noises."""

from __future__ import annotations

import time

import pytest
from injector_testapp import STARTED, check_added_latency, context, get, manifests, start, wait_until

from sregym.cluster.capabilities import CapabilityCache
from sregym.cluster.nodeagent import PodRunner, pids_with_cmdline, runner_for
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.problem import Selector
from sregym.injectors._objects import create_object, delete_object, get_object, list_objects

pytestmark = pytest.mark.cluster
NS = "webshop-pod"
WEB = Selector(kind="Deployment", name="web")


def _web(kube) -> dict:
    def ready() -> list[dict]:
        return [p for p in list_objects(kube, "Pod", NS, {"app": "web"})
                if not p["metadata"].get("deletionTimestamp") and any(
                    c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]
    return wait_until(ready, 180, 2, "a ready web pod")[0]


def url(kube, path: str) -> str:
    return f"http://{_web(kube)['status']['podIP']}:8080{path}"


@pytest.fixture(scope="module")
def app(cluster):
    kube = cluster.kube
    delete_object(kube, "Namespace", NS, None)
    wait_until(lambda: get_object(kube, "Namespace", NS, None) is None, 180, 2, f"namespace {NS} from an earlier run to go")
    create_object(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    create_object(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HIDDEN_NAMESPACE}})
    for m in manifests(NS, "web") + manifests(NS, "peer"):
        create_object(kube, m)
    _web(kube)
    yield kube
    delete_object(kube, "Namespace", NS, None)


@pytest.fixture
def ctx(cluster, app):
    ctx = context(cluster, NS, CapabilityCache(cluster.kube, HIDDEN_NAMESPACE))
    ctx.node_runner = lambda node: runner_for(cluster.kube, node, HIDDEN_NAMESPACE, prefer_host=False)
    yield ctx
    while STARTED:
        STARTED.pop().recover()


def test_the_runner_is_the_pod(ctx, app):
    node = _web(app)["spec"]["nodeName"]
    runner = ctx.node_runner(node)
    assert isinstance(runner, PodRunner)
    assert runner.run(["cat", "/host/proc/1/comm"]).stdout.strip()  # the node's root is there


def test_pause_through_the_pod(ctx, app):
    target = url(app, "/")
    c = start(ctx, "process_signal", {"action": "pause"}, WEB, node=_web(app)["spec"]["nodeName"])
    c.verify()
    assert get(target, timeout=2)[0] == 0
    c.recover()
    assert get(target)[0] == 200


def test_bad_blocks_through_the_pod_fail_the_apps_reads(ctx, app):
    assert get(url(app, "/read?block=3")) == (200, "03")
    c = start(ctx, "latent_sector_error", {"paths": ["/data/blob"], "blocks": [3]}, WEB,
              node=_web(app)["spec"]["nodeName"])
    c.verify()
    # the volume's folder as the node itself sees it: the mount is made in the node's namespace
    assert c.state["files"][0]["node_path"].startswith("/") and not c.state["files"][0]["node_path"].startswith("/host")
    assert get(url(app, "/read?block=3")) == (500, "errno 5: Input/output error")
    assert get(url(app, "/read?block=4")) == (200, "04")
    c.recover()
    assert get(url(app, "/read?block=3")) == (200, "03")
    c.recover()


def test_bad_blocks_turned_on_in_the_volume_layer_through_the_pod(ctx, app):
    """The fault plane's volume layer (the file served, every block good) started through the node
    pod, then a fault's bad blocks turned on in that same server, as a cell of the jobs executor does
    (its conductor runs in a pod, so node work goes through the node pod). The server enters the
    node's mount namespace to mount, and read its control file there, not in the pod where the
    injector wrote it: latent_sector_error's cell errored with "did not take the bad blocks"."""
    node = _web(app)["spec"]["nodeName"]
    start(ctx, "latent_sector_error", {"paths": ["/data/blob"], "blocks": []}, WEB, node=node)
    assert get(url(app, "/read?block=3")) == (200, "03")  # served, every block good
    c = start(ctx, "latent_sector_error", {"paths": ["/data/blob"], "blocks": [3]}, WEB, node=node)
    c.verify()
    assert get(url(app, "/read?block=3")) == (500, "errno 5: Input/output error")
    assert get(url(app, "/read?block=4")) == (200, "04")
    c.recover()
    assert get(url(app, "/read?block=3")) == (200, "03")


def test_packet_loss_through_the_pod(ctx, app):
    target = url(app, "/")
    c = start(ctx, "packet_loss", {"probability": 1.0, "direction": "ingress"}, WEB,
              node=_web(app)["spec"]["nodeName"])
    assert get(target, timeout=2)[0] == 0
    c.verify()
    c.recover()
    assert get(target)[0] == 200


def test_ptrace_syscall_failure_through_the_pod(ctx, app):
    c = start(ctx, "syscall_failure", {"syscalls": ["openat"], "errno": "EIO", "path": "/data/blob"}, WEB,
              mechanism="ptrace", node=_web(app)["spec"]["nodeName"])
    c.verify()
    wait_until(lambda: get(url(app, "/read?block=1"))[0] == 500, 30, 1, "openat failing")
    assert get(url(app, "/read?block=1"))[1].startswith("errno 5")
    c.recover()
    wait_until(lambda: get(url(app, "/read?block=1")) == (200, "01"), 30, 1, "reads back")
    c.recover()


def test_latency_through_the_pod(ctx, app):
    check_added_latency(ctx, url(app, "/"), WEB, _web(app)["spec"]["nodeName"])


def test_cpu_stress_in_the_targets_cgroup_through_the_pod(ctx, app):
    c = start(ctx, "resource_stress", {"resource": "cpu", "workers": 1, "load": 50, "seconds": 120}, WEB,
              node=_web(app)["spec"]["nodeName"])
    assert c.injector.mechanism.name == "stress-ng-in-cgroup"
    c.verify()
    c.recover()
    assert not c.injector.verify(c.state).ok
    c.recover()


@pytest.mark.parametrize("noise", ["noise_cpu_burst", "noise_network_blip"])
def test_node_noise_through_the_pod(ctx, app, noise):
    c = start(ctx, noise, {"duration": 8, "exclude": ["web"]}, Selector(), node=_web(app)["spec"]["nodeName"])
    c.verify(timeout=60)
    time.sleep(12)  # longer than duration: it must have ended by itself
    token = c.state.get("token") or c.state.get("chain")
    assert token, c.state  # both noises run a process on the node, named by this token
    runner = ctx.node_runner(c.state.get("node") or c.state["container"]["node"])
    assert not pids_with_cmdline(runner, token)
    c.recover()
    c.recover()
