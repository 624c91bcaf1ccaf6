"""Every primitive on the real local cluster: inject, see the effect from outside, verify says yes,
recover, the effect is gone, recover again is harmless."""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import replace

import pytest
from injector_testapp import (STARTED, check_added_latency, context, delete_namespace, deploy_test_app, get, manifests,
                              ready_pods, recover_leftovers, start, timed, wait_until)  # noqa: F401 - autouse fixture

from sregym.cluster.capabilities import CapabilityCache
from sregym.cluster.nodeagent import pids_with_cmdline
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.problem import Selector
from sregym.injectors._node import node_runner
from sregym.injectors import INJECTORS
from sregym.injectors._objects import create_object, delete_object, dig, get_object, list_objects

pytestmark = pytest.mark.cluster
NS = "webshop-t"
WEB = Selector(kind="Deployment", name="web")
TELLING = re.compile(r"chaos|(?<![a-z])fault|inject", re.IGNORECASE)  # not "default"


def _ready_pods(kube, app: str) -> list[dict]:
    return ready_pods(kube, NS, app)


@pytest.fixture(scope="module")
def app(cluster):
    kube = cluster.kube
    deploy_test_app(kube, NS)
    yield kube
    delete_namespace(kube, NS, wait=False)


@pytest.fixture(scope="module")
def caps(cluster):
    return CapabilityCache(cluster.kube, HIDDEN_NAMESPACE)


@pytest.fixture
def ctx(cluster, app, caps):
    return context(cluster, NS, caps)


def web_url(kube, path: str) -> str:
    pods = wait_until(lambda: _ready_pods(kube, "web"), 120, 1, "a ready web pod")
    return f"http://{pods[0]['status']['podIP']}:8080{path}"


def service_url(kube, path: str, name: str = "web") -> str:
    svc = get_object(kube, "Service", name, NS)
    return f"http://{svc['spec']['clusterIP']}:8080{path}"


def node_of_web(kube) -> str:
    return wait_until(lambda: _ready_pods(kube, "web"), 120, 1, "a ready web pod")[0]["spec"]["nodeName"]


def settled(kube, name: str) -> None:
    """The Deployment's rollout is complete and its only pod is the ready one (none terminating):
    a fault planned on it next finds a pod that stays."""
    kube.kubectl("-n", NS, "rollout", "status", f"deployment/{name}", "--timeout=180s", timeout=200)
    wait_until(lambda: len(list_objects(kube, "Pod", NS, {"app": name})) == 1 == len(_ready_pods(kube, name)),
               180, 2, f"{name} down to one ready pod")


def healthy(kube) -> None:
    wait_until(lambda: get(service_url(kube, "/"))[0] == 200 and len(_ready_pods(kube, "web")) == 1, 180, 2,
               "web healthy again")


def test_env_var_changed_is_seen_by_the_app_and_restored(ctx, app):
    c = start(ctx, "env_var", {"name": "GREETING", "value": "bonjour"}, WEB)
    c.verify()
    wait_until(lambda: '"GREETING": "bonjour"' in get(web_url(app, "/env"))[1], 120, 2, "new env in the app")
    c.recover()
    wait_until(lambda: '"GREETING": "hello"' in get(web_url(app, "/env"))[1], 120, 2, "old env back")
    c.recover()
    healthy(app)


def test_service_selector_mismatch_leaves_the_service_without_endpoints(ctx, app):
    c = start(ctx, "service_misconfig", {"field": "selector"}, Selector(kind="Service", name="web"))
    c.verify()
    # kube-proxy applies the empty endpoint set within its sync period
    wait_until(lambda: get(service_url(app, "/"), timeout=2)[0] != 200, 60, 1, "the service to stop answering")
    c.recover()
    healthy(app)
    c.recover()
    assert get(service_url(app, "/"))[0] == 200


def test_wrong_target_port_refuses_connections_through_the_service(ctx, app):
    c = start(ctx, "service_misconfig", {"field": "targetPort", "value": 9999}, Selector(kind="Service", name="web"))
    c.verify()
    wait_until(lambda: get(service_url(app, "/"), timeout=2)[0] == 0, 60, 1, "connections refused")
    c.recover()
    c.recover()
    healthy(app)


def test_wrong_container_port_breaks_the_named_target_port(ctx, app):
    c = start(ctx, "container_port", {"value": 9999, "port_name": "http"}, WEB)
    c.verify()
    wait_until(lambda: get(service_url(app, "/"), timeout=2)[0] == 0, 120, 2, "service port broken")
    c.recover()
    c.recover()
    healthy(app)


def test_wrong_image_tag_leaves_new_pods_unable_to_start(ctx, app):
    c = start(ctx, "image_tag", {"tag": "0.0.0-missing"}, WEB)
    v = c.verify()
    assert "ErrImageNeverPull" in v.detail or "ImagePull" in v.detail
    c.recover()
    c.recover()
    healthy(app)


def test_config_value_change_is_read_by_the_app_after_its_restart(ctx, app):
    c = start(ctx, "config_value", {"key": "mode", "value": "degraded", "restart": ["web"]},
              Selector(kind="ConfigMap", name="web-config"))
    c.verify()
    wait_until(lambda: get(web_url(app, "/config?key=mode"))[1] == "degraded", 120, 2, "app reads the new value")
    c.recover()
    wait_until(lambda: get(web_url(app, "/config?key=mode"))[1] == "normal", 120, 2, "app reads the old value")
    c.recover()
    healthy(app)


def test_memory_limit_too_low_kills_the_container(ctx, app):
    c = start(ctx, "resource_limits", {"memory": "6Mi"}, WEB)
    v = c.verify(timeout=180)
    assert "OOMKilled" in v.detail
    c.recover()
    c.recover()
    healthy(app)


def test_cpu_limit_too_low_throttles(ctx, app):
    c = start(ctx, "resource_limits", {"cpu": "10m"}, WEB)
    wait_until(lambda: get(web_url(app, "/big?bytes=2000000"), timeout=20)[0] == 200, 120, 2, "traffic")
    assert "nr_throttled" in c.verify(timeout=180).detail
    c.recover()
    c.recover()
    healthy(app)


def test_replicas_zero_takes_the_service_down(ctx, app):
    c = start(ctx, "replicas_zero", {}, WEB)
    c.verify()
    wait_until(lambda: get(service_url(app, "/"), timeout=2)[0] != 200, 60, 1, "the service to stop answering")
    c.recover()
    c.recover()
    healthy(app)


def test_readiness_probe_on_a_dead_port_keeps_pods_unready(ctx, app):
    c = start(ctx, "probe_misconfig", {"probe": "readiness", "port": 1}, WEB)
    c.verify()
    c.recover()
    c.recover()
    healthy(app)


def test_liveness_probe_on_a_dead_port_restarts_the_container(ctx, app):
    c = start(ctx, "probe_misconfig", {"probe": "liveness", "port": 1}, WEB)
    c.verify(timeout=180)
    c.recover()
    c.recover()
    healthy(app)


@pytest.mark.parametrize("how", ["node_selector", "affinity", "taint"])
def test_unschedulable_pods_stay_pending(ctx, app, how):
    c = start(ctx, "unschedulable", {"how": how}, WEB)
    c.verify()
    c.recover()
    c.recover()
    healthy(app)
    if how == "taint":
        node = get_object(app, "Node", node_of_web(app), None)
        assert not any(t["key"] == "node.kubernetes.io/pool" for t in node["spec"].get("taints") or [])


@pytest.mark.parametrize("how", ["quota", "limit_range"])
def test_tight_quota_or_limit_range_stops_pods_from_coming_back(ctx, app, how):
    c = start(ctx, "resource_quota", {"how": how, "max_memory": "1Mi"}, WEB)
    c.verify()
    wait_until(lambda: get(service_url(app, "/"), timeout=2)[0] != 200, 60, 1, "the service to stop answering")
    c.recover()
    c.recover()
    healthy(app)


def test_rbac_revoke_denies_the_workloads_own_access(ctx, app):
    def can_i() -> str:
        return app.kubectl("auth", "can-i", "get", "configmaps", "-n", NS,
                           f"--as=system:serviceaccount:{NS}:web", check=False).stdout.strip()

    assert can_i() == "yes"
    c = start(ctx, "rbac_revoke", {"verb": "get", "resource": "configmaps"}, WEB)
    c.verify()
    assert can_i() == "no"
    c.recover()
    c.recover()
    assert can_i() == "yes"


def test_pod_kill_replaces_the_pod(ctx, app):
    before = {p["metadata"]["uid"] for p in _ready_pods(app, "web")}
    c = start(ctx, "pod_kill", {}, WEB)
    c.verify()
    wait_until(lambda: {p["metadata"]["uid"] for p in _ready_pods(app, "web")} - before, 120, 2, "a new pod")
    c.recover()
    c.recover()
    healthy(app)


def test_paused_process_stops_answering_until_continued(ctx, app, caps):
    url = web_url(app, "/")
    c = start(ctx, "process_signal", {"action": "pause"}, WEB, node=node_of_web(app))
    c.verify()
    assert get(url, timeout=2)[0] == 0
    c.recover()
    assert get(url)[0] == 200
    c.recover()


def test_latent_sector_error_fails_the_apps_own_reads_of_bad_blocks(ctx, app):
    assert get(web_url(app, "/read?block=3")) == (200, "03")
    c = start(ctx, "latent_sector_error", {"paths": ["/data/blob"], "blocks": [3, 9]}, WEB, node=node_of_web(app))
    assert c.injector.mechanism.name in ("fuse-bad-blocks", "dm-dust")
    c.verify()
    assert get(web_url(app, "/read?block=3")) == (500, "errno 5: Input/output error")
    assert get(web_url(app, "/read?block=9"))[0] == 500
    assert get(web_url(app, "/read?block=4")) == (200, "04")
    c.recover()
    assert get(web_url(app, "/read?block=3")) == (200, "03")
    c.recover()
    assert not c.injector.verify(c.state).ok
    if c.injector.mechanism.name == "fuse-bad-blocks":  # repaired, not killed: it leaves once nothing holds it
        runner = node_runner(ctx, c.state["container"]["node"])
        assert not pids_with_cmdline(runner, c.state["files"][0]["token"])


def test_syscall_failure_by_ptrace_fails_only_the_chosen_path(ctx, app):
    c = start(ctx, "syscall_failure", {"syscalls": ["openat"], "errno": "EIO", "path": "/data/blob"}, WEB,
              mechanism="ptrace", node=node_of_web(app))
    c.verify()
    wait_until(lambda: get(web_url(app, "/read?block=1"))[0] == 500, 30, 1, "openat failing")
    assert get(web_url(app, "/read?block=1"))[1].startswith("errno 5")
    assert get(web_url(app, "/config?key=mode")) == (200, "normal")
    c.recover()
    wait_until(lambda: get(web_url(app, "/read?block=1")) == (200, "01"), 30, 1, "reads back")
    c.recover()


def test_syscall_failure_by_ptrace_follows_a_restart_of_the_container(ctx, app):
    """A process that crashes restarts its container, not its pod (a database that panics on a
    failed fsync): the tracer is attached again to the new container, as a failing disk stays."""
    from sregym.cluster.nodeagent import container_processes

    c = start(ctx, "syscall_failure", {"syscalls": ["fsync"], "errno": "EIO"}, WEB, mechanism="ptrace",
              node=node_of_web(app))
    c.verify()
    wait_until(lambda: get(web_url(app, "/fsync"))[1].startswith("errno 5"), 30, 1, "fsync failing")
    tc = c.state["container"]
    runner = node_runner(ctx, tc["node"])
    pod = get_object(app, "Pod", tc["pod"], NS)
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    runner.run(["kill", "-KILL", str(container_processes(runner, tc["container_id"])[0].pid)])
    wait_until(lambda: get_object(app, "Pod", tc["pod"], NS)["status"]["containerStatuses"][0]["restartCount"]
               > restarts, 60, 1, "the container to restart in the same pod")
    wait_until(lambda: get(web_url(app, "/fsync"))[1].startswith("errno 5"), 60, 1, "fsync failing again")
    assert c.injector.verify(c.state).ok
    c.recover()
    wait_until(lambda: get(web_url(app, "/fsync")) == (200, "synced"), 30, 1, "fsync working")
    assert not pids_with_cmdline(runner, c.state["token"])  # supervisor and tracers are gone
    c.recover()


def test_syscall_failure_by_seccomp_restarts_the_container_under_the_profile(ctx, app):
    c = start(ctx, "syscall_failure", {"syscalls": ["fsync"], "errno": "ENOSPC"}, WEB, mechanism="seccomp",
              node=node_of_web(app))
    assert c.injector.mechanism.name == "seccomp"
    c.verify(timeout=180)
    wait_until(lambda: get(web_url(app, "/fsync"))[1].startswith("errno 28"), 120, 2, "fsync failing with ENOSPC")
    c.recover()
    wait_until(lambda: get(web_url(app, "/fsync")) == (200, "synced"), 180, 2, "fsync working")
    c.recover()


def test_packet_loss_of_all_packets_makes_the_pod_unreachable(ctx, app):
    url = web_url(app, "/")
    c = start(ctx, "packet_loss", {"probability": 1.0, "direction": "ingress"}, WEB, node=node_of_web(app))
    assert get(url, timeout=2)[0] == 0
    c.verify()
    c.recover()
    assert get(url)[0] == 200
    c.recover()


# run in the target pod by `kubectl exec` (the kubelet's stream, not the pod's network)
FETCH = ("import sys, urllib.request\ntry:\n print(urllib.request.urlopen(sys.argv[1], timeout=3).status)\n"
         "except OSError:\n print('no answer')\n")
UDP_TO_ITSELF = ("import socket, sys\nport = int(sys.argv[1])\n"
                 "a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind(('127.0.0.1', port)); a.settimeout(2)\n"
                 "try:\n socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'answered', ('127.0.0.1', port))\n"
                 " print(a.recv(16).decode())\nexcept OSError:\n print('no answer')\n")  # a drop in OUTPUT: EPERM


def in_pod(kube, pod: str, script: str, *args: str) -> str:
    return kube.kubectl("exec", "-n", NS, pod, "--", "python3", "-c", script, *args, timeout=30).stdout.strip()


def test_packet_loss_of_all_packets_spares_the_pods_own_loopback(ctx, app):
    """A lossy link drops what crosses it, not a process talking to itself: with every packet of
    web lost both ways, web still answers itself on 127.0.0.1 while nothing it sends to peer does."""
    pod = _ready_pods(app, "web")[0]["metadata"]["name"]
    peer = service_url(app, "/", "peer")  # by address: its name would need DNS, lost too
    assert in_pod(app, pod, FETCH, peer) == "200"
    c = start(ctx, "packet_loss", {"probability": 1.0, "direction": "both"}, WEB, node=node_of_web(app))
    assert in_pod(app, pod, FETCH, "http://127.0.0.1:8080/") == "200"
    assert in_pod(app, pod, FETCH, peer) == "no answer"
    c.verify()
    c.recover()
    assert in_pod(app, pod, FETCH, peer) == "200"
    c.recover()


def test_partition_cuts_the_path_to_the_peer_service_only(ctx, app):
    assert get(web_url(app, "/peer?name=peer"))[0] == 200
    c = start(ctx, "network_partition", {"peer_service": "peer"}, WEB, node=node_of_web(app))
    assert get(web_url(app, "/peer?name=peer"), timeout=8)[0] == 500
    assert get(web_url(app, "/"))[0] == 200
    c.verify()
    c.recover()
    assert get(web_url(app, "/peer?name=peer"))[0] == 200
    c.recover()


def test_dns_failure_for_one_name(ctx, app):
    if get(web_url(app, "/dns?name=peer"), timeout=8)[0] != 200:
        pytest.skip("cluster DNS does not answer from pods")
    c = start(ctx, "dns_failure", {"name": "peer"}, WEB, node=node_of_web(app))
    assert get(web_url(app, "/dns?name=peer"), timeout=20)[0] != 200  # 500, or no answer while retrying
    assert get(web_url(app, "/dns?name=localhost"))[0] == 200
    c.verify()
    c.recover()
    assert get(web_url(app, "/dns?name=peer"), timeout=8)[0] == 200
    c.recover()


def test_dns_failure_spares_a_resolver_on_the_pods_loopback(ctx, app):
    """DNS that cannot be reached leaves a resolver in the pod (a caching sidecar on 127.0.0.1:53)
    reachable: only what leaves the pod for port 53 is dropped."""
    pod = _ready_pods(app, "web")[0]["metadata"]["name"]
    c = start(ctx, "dns_failure", {}, WEB, node=node_of_web(app))
    c.verify()  # a query to the pod's nameserver went unanswered
    assert in_pod(app, pod, UDP_TO_ITSELF, "53") == "answered"
    c.recover()
    c.recover()


def test_bandwidth_limit_slows_a_download(ctx, app):
    url = web_url(app, "/big?bytes=500000")
    assert timed(url) < 1.0
    c = start(ctx, "bandwidth_limit", {"rate": "1mbit", "burst": "32kbit"}, WEB, node=node_of_web(app))
    c.verify()
    assert timed(url) > 3.0  # 4 Mbit at 1 Mbit/s
    c.recover()
    assert timed(url) < 1.0
    c.recover()


def test_latency_is_added_to_every_request(ctx, app):
    check_added_latency(ctx, web_url(app, "/"), WEB, node_of_web(app))


def test_cpu_stress_inside_the_targets_cgroup(ctx, app):
    c = start(ctx, "resource_stress", {"resource": "cpu", "workers": 1, "load": 50, "seconds": 120}, WEB,
              node=node_of_web(app))
    c.verify()
    c.recover()
    assert not c.injector.verify(c.state).ok
    c.recover()


def _oom_kills(kube, name: str) -> int:
    """How many times the app's container was OOM-killed (restarts whose last state says so)."""
    pods = list_objects(kube, "Pod", NS, {"app": name})
    return sum(cs.get("restartCount", 0) for p in pods for cs in p["status"].get("containerStatuses") or []
               if (cs.get("lastState", {}).get("terminated") or {}).get("reason") == "OOMKilled")


def test_memory_held_in_the_pod_cgroup_gets_the_app_oom_killed_until_recovered(ctx, app):
    """A co-process at the node's default OOM score holds most of the pod's 128Mi: the app (score
    raised by the kubelet) is what gets killed, and again after each restart (the pressure is in the
    pod's cgroup, not the container's)."""
    for m in manifests(NS, "hog"):
        create_object(app, m)
    try:
        wait_until(lambda: _ready_pods(app, "hog"), 120, 2, "hog ready")
        # 116 MiB of the pod's 128Mi leave the app ~10 MB: less than it needs
        c = start(ctx, "resource_stress", {"resource": "memory", "memory": "116M", "cgroup": "pod",
                                           "oom_first": False}, Selector(kind="Deployment", name="hog"),
                  node=_ready_pods(app, "hog")[0]["spec"]["nodeName"])
        wait_until(lambda: _oom_kills(app, "hog") >= 2, 180, 3, "the app OOM-killed twice")
        assert c.injector.verify(c.state).ok  # the stress process itself survived every kill
        c.recover()
        wait_until(lambda: _ready_pods(app, "hog"), 360, 3, "hog ready again (after its crash-loop back-off)")
        kills = _oom_kills(app, "hog")  # a kill may land while recover runs; none after the app is back
        time.sleep(15)
        assert _oom_kills(app, "hog") == kills and _ready_pods(app, "hog")
        assert not c.injector.verify(c.state).ok
        c.recover()
    finally:
        while STARTED:
            STARTED.pop().recover()
        for m in manifests(NS, "hog"):
            delete_object(app, m["kind"], m["metadata"]["name"], NS)


def test_load_surge_scales_the_generator(ctx, app):
    c = start(ctx, "load_surge", {"replicas": 2, "env": {"RPS": "50"}}, Selector(kind="Deployment", name="peer"))
    c.verify()
    c.recover()
    settled(app, "peer")
    c.recover()


def test_nothing_injected_carries_a_telling_name(ctx, app):
    settled(app, "peer")  # the taint below would leave a replacement peer pod Pending
    node = node_of_web(app)
    cycles = [start(ctx, "resource_quota", {}, WEB),
              start(ctx, "unschedulable", {"how": "taint"}, WEB),
              start(ctx, "packet_loss", {"probability": 0.1}, Selector(kind="Deployment", name="peer"),
                    node=node)]
    try:
        for kind in ("ResourceQuota", "Pod", "Deployment", "Service", "ConfigMap", "Role", "Event"):
            for obj in list_objects(app, kind, NS):
                meta = obj["metadata"]
                text = " ".join([meta["name"], str(meta.get("labels")), str(meta.get("annotations"))])
                assert not TELLING.search(text), f"{kind} {meta['name']}: {text}"
        for node in list_objects(app, "Node", None):
            assert not TELLING.search(str(node["spec"].get("taints")))
        assert not TELLING.search(cycles[2].state["chain"])
    finally:
        for c in reversed(cycles):
            c.recover()
    healthy(app)


@pytest.mark.parametrize("noise", ["noise_pod_restart", "noise_rolling_restart", "noise_cpu_burst",
                                   "noise_network_blip", "noise_load_spike", "noise_log_burst"])
def test_noise_is_transient_and_never_touches_the_excluded_component(ctx, app, noise):
    settled(app, "web")
    settled(app, "peer")
    web_uids = {p["metadata"]["uid"] for p in _ready_pods(app, "web")}
    c = start(ctx, noise, {"duration": 8, "exclude": ["web"]}, Selector(), node=node_of_web(app))
    touched = [c.state.get("pod"), c.state.get("name"), c.state.get("service"), (c.state.get("container") or {}).get("pod")]
    assert not any(t and (t == "web" or t.startswith("web-")) for t in touched), touched
    c.verify(timeout=60)
    time.sleep(12)  # longer than duration: it must have ended by itself
    process = c.state.get("token") or c.state.get("chain")
    # the noises that run a process say so by a token; the others edit objects (checked below)
    assert bool(process) == (noise not in ("noise_pod_restart", "noise_rolling_restart")), c.state
    if process:
        runner = node_runner(ctx, c.state.get("node") or c.state["container"]["node"])
        assert not pids_with_cmdline(runner, process)
    c.recover()
    c.recover()
    assert {p["metadata"]["uid"] for p in _ready_pods(app, "web")} == web_uids
    wait_until(lambda: len(_ready_pods(app, "peer")) == 1, 120, 2, "peer back")


def test_network_blip_noise_spares_the_pods_own_loopback(ctx, app):
    """The blip is a lossy link for a while: the pod it picks still answers itself on 127.0.0.1."""
    c = start(ctx, "noise_network_blip", {"duration": 20, "probability": 1.0, "exclude": ["web"]}, Selector(),
              node=node_of_web(app))
    c.verify(timeout=30)
    assert in_pod(app, c.state["pod"], FETCH, "http://127.0.0.1:8080/") == "200"
    c.recover()


def test_noise_choices_repeat_with_the_seed(cluster, app, caps):
    picks = []
    for _ in range(2):
        c = start(context(cluster, NS, caps, seed=42), "noise_network_blip", {"duration": 3, "exclude": ["web"]},
                  Selector(), node=node_of_web(app))
        picks.append(c.state["pod"])
        c.recover()
    assert picks[0] == picks[1]


def _kubectl_edit_carriers(kube) -> set[str]:
    """What the field-manager attack names: every object whose managedFields carry `kubectl-edit`."""
    return {f"{kind}/{o['metadata']['name']}" for kind in ("Deployment", "StatefulSet", "Service", "ConfigMap")
            for o in list_objects(kube, kind, NS)
            if any(m.get("manager") == "kubectl-edit" for m in o["metadata"].get("managedFields") or [])}


def test_manual_edit_noise_leaves_kubectl_edit_beyond_the_root_cause(ctx, app):
    """The attack: list managedFields, name the carrier of `kubectl-edit`. A fault alone makes its
    object the only new carrier; a manual_edit noise (on a seed that picks another object) adds one,
    with the same manager on the field it changed, and puts the field back when it stops."""
    before = _kubectl_edit_carriers(app)
    root = Selector(kind="Service", name="web")
    fault = start(replace(ctx, exclude=["web"]), "service_misconfig", {"field": "targetPort", "value": 9999}, root)
    assert _kubectl_edit_carriers(app) - before <= {"Service/web"}  # without the noise the attack works
    cls = INJECTORS.get("noise_manual_edit")
    seed = next(s for s in range(1, 50) if cls(cls.Params(), Selector(), replace(ctx, seed=s, exclude=["web"]),
                                               cls.mechanisms[0]).plan().name != "web")
    c = start(replace(ctx, seed=seed, exclude=["web"]), "noise_manual_edit", {"duration": 8}, Selector())
    c.verify(timeout=20)
    e = c.state.edits[0]
    carriers = _kubectl_edit_carriers(app)
    assert f"{e['kind']}/{e['name']}" in carriers and carriers != {"Service/web"}, carriers
    obj = get_object(app, e["kind"], e["name"], NS)
    owned = [m["fieldsV1"] for m in obj["metadata"]["managedFields"] if m["manager"] == "kubectl-edit"]
    assert any(f"f:{e['path'][-1]}" in json.dumps(f) for f in owned), owned
    c.recover()
    c.recover()
    assert dig(get_object(app, e["kind"], e["name"], NS), e["path"]) == e["before"]
    fault.recover()
    fault.recover()
    healthy(app)


@pytest.fixture
def small_volume(tmp_path):
    """A 64 MiB ext4 file system of its own (a loop device) to serve as a hostPath volume."""
    image, mnt = tmp_path / "vol.img", tmp_path / "vol"
    mnt.mkdir()
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    yield str(mnt)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_makes_the_apps_writes_fail_with_enospc(ctx, app, small_volume):
    ms = manifests(NS, "store")
    dep = next(m for m in ms if m["kind"] == "Deployment")
    dep["spec"]["template"]["spec"]["volumes"][0] = {"name": "data", "hostPath": {"path": small_volume}}
    for m in ms:
        create_object(app, m)
    try:
        pods = wait_until(lambda: _ready_pods(app, "store"), 120, 2, "store ready")
        url = f"http://{pods[0]['status']['podIP']}:8080/write?bytes=1000000"
        assert get(url) == (200, "written")
        c = start(ctx, "disk_full", {"path": "/data"}, Selector(kind="Deployment", name="store"),
                  node=pods[0]["spec"]["nodeName"])
        c.verify()
        status, body = get(url)
        assert status == 500 and body.startswith("errno 28"), body
        c.recover()
        assert get(url) == (200, "written")
        c.recover()
    finally:
        delete_object(app, "Deployment", "store", NS)


def test_disk_full_refuses_to_fill_the_nodes_own_disk(ctx, app):
    from sregym.core.errors import MechanismUnavailable

    with pytest.raises(MechanismUnavailable, match="root file system"):
        start(ctx, "disk_full", {"path": "/data"}, WEB, node=node_of_web(app))


def _has_image(kube, prefix: str) -> bool:
    return any(n.startswith(prefix) for node in kube.core.list_node().items
               for img in node.status.images or [] for n in img.names or [])


def test_redis_password_rotated_on_the_server_only(ctx, app):
    if not _has_image(app, "docker.io/sregym/redis:") and not _has_image(app, "sregym/redis:"):
        pytest.skip("the sregym/redis image is not on the node")
    labels = {"app": "kv"}
    create_object(app, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kv", "namespace": NS},
                        "stringData": {"password": "s3cret-one"}})
    create_object(app, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kv", "namespace": NS},
                        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                            "metadata": {"labels": labels}, "spec": {"containers": [{
                                "name": "redis", "image": "sregym/redis:latest", "imagePullPolicy": "Never",
                                "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "kv", "key": "password"}}}],
                                "args": ["--port", "6379", "--requirepass", "$(PW)", "--protected-mode", "no"]}]}}}})
    try:
        wait_until(lambda: _ready_pods(app, "kv"), 120, 2, "redis ready")
        c = start(ctx, "credential_rotation", {"secret": "kv"}, Selector(kind="Deployment", name="kv"))
        assert c.injector.mechanism.name == "redis-config-set"
        assert c.verify().ok
        pod = c.state["pod"]
        out = app.kubectl("exec", "-n", NS, pod, "--", "redis-cli", "-a", "s3cret-one", "--no-auth-warning", "ping",
                          check=False)
        assert "PONG" not in out.stdout  # the clients' password is refused
        c.recover()
        out = app.kubectl("exec", "-n", NS, pod, "--", "redis-cli", "-a", "s3cret-one", "--no-auth-warning", "ping")
        assert "PONG" in out.stdout
        c.recover()
    finally:
        delete_object(app, "Deployment", "kv", NS)


@pytest.mark.parametrize("how", ["unbound", "missing"])
def test_pvc_problem_leaves_new_pods_pending(ctx, app, tmp_path, how):
    pv = f"{NS}-vol-{how}"
    create_object(app, {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                 "storageClassName": "", "hostPath": {"path": str(tmp_path)},
                                 "persistentVolumeReclaimPolicy": "Retain"}})
    create_object(app, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "files", "namespace": NS},
                        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv,
                                 "resources": {"requests": {"storage": "1Gi"}}}})
    ms = manifests(NS, "files")
    dep = next(m for m in ms if m["kind"] == "Deployment")
    dep["spec"]["template"]["spec"]["volumes"][0] = {"name": "data", "persistentVolumeClaim": {"claimName": "files"}}
    for m in ms:
        create_object(app, m)
    try:
        wait_until(lambda: _ready_pods(app, "files"), 120, 2, "files ready")
        c = start(ctx, "pvc_problem", {"how": how}, Selector(kind="Deployment", name="files"))
        c.verify()
        c.recover()
        wait_until(lambda: len(_ready_pods(app, "files")) == 1 and not get_object(
            app, "PersistentVolumeClaim", "files-v2", NS), 120, 2, "files healthy, claim gone")
        c.recover()
    finally:
        while STARTED:  # recover while the Deployment still exists
            STARTED.pop().recover()
        delete_object(app, "Deployment", "files", NS)
        delete_object(app, "PersistentVolumeClaim", "files", NS)
        delete_object(app, "PersistentVolume", pv, None)
        wait_until(lambda: get_object(app, "PersistentVolumeClaim", "files", NS) is None, 120, 2, "claim gone")


def test_network_policy_deny_cuts_the_dependency(ctx, app, caps, cluster):
    node = node_of_web(app)
    enforced = caps(node).get("network_policy_enforcement")
    if cluster.provider == "local":  # kube-router's firewall runs beside the kubelet
        assert enforced, caps.get(node).details["network_policy_enforcement"]
    assert get(web_url(app, "/peer?name=peer"))[0] == 200
    c = start(ctx, "network_policy_deny", {"dependency": "peer"}, WEB, node=node)
    assert c.injector.mechanism.name == ("networkpolicy" if enforced else "iptables-egress-drop")
    c.verify()
    if enforced:  # the policy object itself is what an agent finds
        assert get_object(app, "NetworkPolicy", "default-egress", NS) is not None
    assert get(web_url(app, "/peer?name=peer"), timeout=8)[0] == 500
    c.recover()
    assert get(web_url(app, "/peer?name=peer"))[0] == 200
    c.recover()


def test_network_policy_deny_falls_back_to_iptables_in_the_pod(ctx, app):
    """The mechanism for clusters whose network plugin enforces no NetworkPolicy."""
    c = start(ctx, "network_policy_deny", {"dependency": "peer"}, WEB, mechanism="iptables-egress-drop",
              node=node_of_web(app))
    c.verify()
    assert get(web_url(app, "/peer?name=peer"), timeout=8)[0] == 500
    assert get_object(app, "NetworkPolicy", "default-egress", NS) is None
    c.recover()
    assert get(web_url(app, "/peer?name=peer"))[0] == 200
    c.recover()
