"""The anti-gaming matrix's independent checks (tests/integration/oracles/fault_effects.py) decide
each cell's expectation, so a check that calls a persisting fault gone turns a right grade into a
"wrong" cell. Measured: ``hotel_geo_container_port`` x ``restart_every_pod`` was called cured
because geo's Service answered, while the Deployment's template still declared port http=8081: the
readiness probe uses the named port, so the new pod never got ready and the old ReplicaSet's pod,
restarted like every other, kept serving."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))  # fault_effects imports the shared shop_users helper, as in pytest's rootdir
sys.path.insert(0, str(TESTS / "integration" / "oracles"))

import fault_effects  # noqa: E402

from sregym.core.loader import load_catalog  # noqa: E402


def geo_pod(name: str, ip: str, port: int) -> dict:
    return {"metadata": {"name": name}, "status": {"podIP": ip, "phase": "Running"},
            "spec": {"containers": [{"name": "geo", "ports": [{"name": "http", "containerPort": port}]}]}}


OLD = geo_pod("geo-old-aaaaa", "10.0.0.5", 8080)   # the ReplicaSet of the chart's template, ready
NEW = geo_pod("geo-new-bbbbb", "10.0.0.6", 8081)   # the faulty template's pod, never ready


@pytest.fixture
def container_port_fault():
    problem = load_catalog().problems["hotel_geo_container_port"].problem
    [fault] = problem.faults
    return problem, fault


@pytest.fixture
def world(monkeypatch):
    """What the check sees: the target's running pods, and a process listening on 8080 only (the
    image's PORT); the Service answers from whichever pod is ready."""
    state = {"pods": [OLD, NEW], "asked": []}

    def probe(kube, ns, pod, container, kind, host, port, path="/readyz"):
        state["asked"].append((host, port))
        listening = port == 8080
        return fault_effects.Effect(not listening, f"{kind} {host}:{port} from {pod}: "
                                                   + ("connected" if listening else "ConnectionRefusedError"))

    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: state["pods"] if w == "geo" else [])
    monkeypatch.setattr(fault_effects, "_peer", lambda kube, ns, avoid: ("frontend-1", "frontend"),
                        raising=False)  # absent before the check asked each pod
    monkeypatch.setattr(fault_effects, "probe", probe)
    monkeypatch.setattr(fault_effects, "serves", lambda kube, ns, s, many=False:
                        fault_effects.Effect(False, f"http {s}:8080: HTTP 200 /readyz"))
    return state


def test_a_stalled_rollout_with_the_old_pod_serving_is_not_a_cured_port(container_port_fault, world):
    problem, fault = container_port_fault
    effect = fault_effects.one_effect(None, "hotel-reservation-gaming", problem, fault)
    assert effect.present, effect.evidence
    assert ("10.0.0.6", 8081) in world["asked"]
    assert "geo-new-bbbbb/geo declares http=8081" in effect.evidence


def test_every_pod_on_the_chart_port_is_cured(container_port_fault, world):
    problem, fault = container_port_fault
    world["pods"] = [OLD]  # the rollout undone: only the chart's template runs
    effect = fault_effects.one_effect(None, "hotel-reservation-gaming", problem, fault)
    assert not effect.present, effect.evidence
    assert "HTTP 200" in effect.evidence


def test_no_running_pod_of_the_target_is_not_cured(container_port_fault, world):
    problem, fault = container_port_fault
    world["pods"] = []
    assert fault_effects.one_effect(None, "hotel-reservation-gaming", problem, fault).present


# Measured: ``hotel_user_limit_range`` x ``recreate_namespace_objects`` recreated the user Deployment
# before the LimitRange, so its pod ran and the check (the Service answers) called the fault cured
# while the LimitRange stood again: the next user pod is refused as before.
USER = {"kind": "Deployment", "metadata": {"name": "user"}, "spec": {"template": {
    "metadata": {"labels": {"app.kubernetes.io/name": "user"}},
    "spec": {"containers": [{"name": "user", "resources": {"limits": {"memory": "128Mi"}}}]}}}}


class FakeKube:
    """kubectl as the check uses it: ``get`` answers the Deployment, ``create --dry-run=server`` is
    admission's verdict on the pod sent."""

    def __init__(self, refusal: str | None):
        self.refusal, self.sent = refusal, []

    def kubectl(self, *args, input=None, check=True, timeout=None):
        if args[0] == "get":
            return subprocess.CompletedProcess(args, 0, json.dumps(USER), "")
        assert args[:2] == ("create", "--dry-run=server"), args
        self.sent.append(json.loads(input))
        return subprocess.CompletedProcess(args, 1 if self.refusal else 0, "pod/user-x created (server dry run)",
                                           self.refusal or "")


def answering_fault(monkeypatch, problem_id: str, answer: str) -> tuple:
    """The problem's first fault, with every Service answering ``answer`` (the check's old ground)."""
    monkeypatch.setattr(fault_effects, "serves", lambda kube, ns, s, many=False: fault_effects.Effect(False, answer))
    problem = load_catalog().problems[problem_id].problem
    return problem, problem.faults[0]


@pytest.fixture
def limit_range_fault(monkeypatch):
    return answering_fault(monkeypatch, "hotel_user_limit_range", "http user:8080: HTTP 200 /readyz")


def test_a_workload_running_while_its_next_pod_is_refused_is_not_cured(limit_range_fault):
    problem, fault = limit_range_fault
    kube = FakeKube('Error from server (Forbidden): pods "user-x" is forbidden: maximum memory usage per '
                    'Container is 8Mi, but limit is 128Mi')
    effect = fault_effects.one_effect(kube, "hotel-reservation-gaming", problem, fault)
    assert effect.present, effect.evidence
    assert "maximum memory usage per Container is 8Mi" in effect.evidence
    [pod] = kube.sent  # the workload's own template, as its ReplicaSet would send it
    assert pod["kind"] == "Pod" and pod["spec"] == USER["spec"]["template"]["spec"]
    assert pod["metadata"]["labels"] == {"app.kubernetes.io/name": "user"}


def test_a_new_pod_admitted_and_the_service_serving_is_cured(limit_range_fault):
    problem, fault = limit_range_fault
    effect = fault_effects.one_effect(FakeKube(None), "hotel-reservation-gaming", problem, fault)
    assert not effect.present, effect.evidence


# Measured: ``shop_redis_disk_full`` x ``do_nothing`` was called cured (the check asked whether
# shop-redis answers, and it answered -NOAUTH to an unauthenticated ping) while /data stood 100%
# full: Redis takes a write into memory and answers OK, and refuses the next ones with MISCONF once
# its append to the full file system failed. A volume it cannot append to is what users feel.
REDIS = {"metadata": {"name": "shop-redis-0"}, "status": {"phase": "Running"},
         "spec": {"containers": [{"name": "redis", "ports": [{"containerPort": 6379}]}]}}


class RedisKube:
    """``kubectl exec`` into the Redis container: what redis-cli prints for the check's script, and
    what ``df`` says of its volume."""

    def __init__(self, printed: str, used: str = "40%"):
        self.printed, self.used, self.scripts = printed, used, []

    def kubectl(self, *args, input=None, check=True, timeout=None):
        assert args[0] == "exec", args
        command = args[args.index("--") + 1:]
        self.scripts.append(command)
        if command[0] == "df":
            return subprocess.CompletedProcess(args, 0, "Filesystem 1024-blocks Used Available Capacity Mounted on\n"
                                                        f"tmpfs 65536 65536 0 {self.used} /data\n", "")
        return subprocess.CompletedProcess(args, 0, self.printed, "")


@pytest.fixture
def disk_full_fault(monkeypatch):
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [REDIS] if w == "shop-redis" else [])
    return answering_fault(monkeypatch, "shop_redis_disk_full", "redis shop-redis:6379: -NOAUTH Authentication required.")


MISCONF = "MISCONF Errors writing to the AOF file: No space left on device\n"


@pytest.mark.parametrize(("printed", "present"), [
    ("OK\n" + MISCONF + MISCONF, True),   # took one write, refuses the next: the volume is still full
    ("OK\nOK\n1\n", False),              # keeps taking writes: cured
])
def test_a_redis_volume_is_cured_only_when_redis_keeps_taking_writes(disk_full_fault, printed, present):
    effect = fault_effects.one_effect(RedisKube(printed), "online-shop-gaming", *disk_full_fault)
    assert (effect.present, "MISCONF" in effect.evidence) == (present, present), effect.evidence


# Measured: ``shop_concurrent_pool_leak_and_worker_queue`` x ``rollout_undo`` sent api back to the
# ReplicaSet before the fault's restart, whose pod (started before the ConfigMap turned bad) still
# ran: the check read CART_PRICE_REFRESH=false in every running api container and called the fault
# gone, while shop-settings still said true and api's next pod reads it.
API = {"metadata": {"name": "api-6c9dcf958b-775j6"}, "status": {"phase": "Running"},
       "spec": {"containers": [{"name": "api"}]}}


class SettingsKube:
    """``printenv`` in the running api container, and shop-settings as the API server holds it."""

    def __init__(self, running: str, stored: str):
        self.running, self.stored = running, stored

    def kubectl(self, *args, input=None, check=True, timeout=None):
        if args[0] == "exec":
            return subprocess.CompletedProcess(args, 0, self.running + "\n", "")
        assert args[:3] == ("get", "configmap", "shop-settings"), args
        return subprocess.CompletedProcess(args, 0, json.dumps({"data": {"CART_PRICE_REFRESH": self.stored}}), "")


@pytest.mark.parametrize(("running", "stored", "present"), [
    ("false", "true", True),    # old pods run, the ConfigMap still holds the bad value
    ("true", "true", True),     # the pods read it
    ("false", "false", False),  # put back, and no pod runs with it
])
def test_a_bad_setting_is_gone_only_from_both_the_pods_and_the_configmap(monkeypatch, running, stored, present):
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [API] if w == "api" else [])
    problem = load_catalog().problems["shop_concurrent_pool_leak_and_worker_queue"].problem
    fault = next(f for f in problem.faults if f.injector == "config_value")
    effect = fault_effects.one_effect(SettingsKube(running, stored), "online-shop-gaming", problem, fault)
    assert effect.present == present, effect.evidence


# The same stalled rollout as the container port's, for an env entry: geo's template without
# DB_PASSWORD makes a pod that crashes (``printenv`` cannot run in it), while the old ReplicaSet's
# pod, started with the password, still runs. Its env says nothing of what geo's next pod gets.
GEO_OLD = {"metadata": {"name": "geo-old-aaaaa"}, "status": {"phase": "Running"},
           "spec": {"containers": [{"name": "geo"}]}}
SECRET_REF = {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "hotel-db", "key": "password"}}}


class GeoKube:
    """``printenv`` in the old geo pod (it has the password), and geo's Deployment with ``env``."""

    def __init__(self, env: list[dict]):
        self.env = env

    def kubectl(self, *args, input=None, check=True, timeout=None):
        if args[0] == "exec":
            return subprocess.CompletedProcess(args, 0, "hotel-db-2f8a61\n", "")
        assert args[:3] == ("get", "deployment", "geo"), args
        return subprocess.CompletedProcess(args, 0, json.dumps({"spec": {"template": {"spec": {"containers": [
            {"name": "geo", "env": self.env}]}}}}), "")


@pytest.mark.parametrize(("env", "present"), [([], True), ([SECRET_REF], False)])
def test_an_env_entry_is_gone_from_the_fault_only_when_the_template_has_it_back(monkeypatch, env, present):
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [GEO_OLD] if w == "geo" else [])
    problem = load_catalog().problems["hotel_geo_missing_db_password"].problem
    effect = fault_effects.one_effect(GeoKube(env), "hotel-reservation-gaming", problem, problem.faults[0])
    assert effect.present == present, effect.evidence


# Measured: after a restart of every pod the fault filled the new pod's volume again (100% full),
# yet the new Redis took the check's writes: its fresh append-only file still had room in its last
# page. The users' writes used that up within a minute (api 503 in the same cell on the day before).
def test_a_redis_taking_writes_on_a_volume_still_full_is_not_cured(disk_full_fault):
    effect = fault_effects.one_effect(RedisKube("OK\nOK\n1\n", used="100%"), "online-shop-gaming", *disk_full_fault)
    assert effect.present, effect.evidence
    assert "/data 100% used" in effect.evidence


class _Postgres:
    """A local TCP server that answers postgres's SSLRequest with 'N' after ``delay`` s, as shop-db
    does behind a slow link (its one-byte answer gets through; it just comes late)."""

    def __init__(self, delay: float):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.delay = delay
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        import time

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(8)
                time.sleep(self.delay)
                conn.sendall(b"N")


def run_probe(kind: str, port: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", fault_effects.PROBE, kind, "127.0.0.1", str(port)],
                          capture_output=True, text=True, timeout=60)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_one_late_answer_is_served_but_a_link_that_makes_every_answer_late_is_not():
    """shop_db_bandwidth_limit x reconfigure_loadgen (refused, so the 2 kbit/s limit stayed) was called
    "fault gone" because postgres answered one SSLRequest. The many-exchange probe times each of
    20 exchanges: late answers are the fault's effect, not service."""
    slow, fast = _Postgres(0.6), _Postgres(0.0)
    try:
        assert run_probe("postgres", slow.port)["ok"] is True  # the single exchange the check used before
        late = run_probe("many:postgres", slow.port)
        assert late["ok"] is False and "20/20 postgres exchanges failed or took over 0.5 s" in late["detail"]
        assert run_probe("many:postgres", fast.port) == {"ok": True,
                                                         "detail": "20/20 postgres exchanges answered within 0.5 s"}
    finally:
        slow.sock.close()
        fast.sock.close()


@pytest.mark.parametrize("injector", ["bandwidth_limit", "network_latency", "packet_loss"])
def test_slow_and_lossy_links_are_checked_with_many_exchanges(monkeypatch, injector):
    asked = []
    monkeypatch.setattr(fault_effects, "serves", lambda kube, ns, service, many=False: asked.append((service, many)))
    fault = type("F", (), {"injector": injector, "params": {}, "target": type("T", (), {"kind": "StatefulSet",
                                                                                         "name": "shop-db"})()})()
    fault_effects.one_effect(None, "online-shop", None, fault)
    assert asked == [("shop-db", True)]


class PodsKube:
    """``kubectl get pods -o json`` and ``kubectl exec`` as the checks call them."""

    def __init__(self, pods: list[dict], exec_out: str = "", exec_err: str = "", exec_rc: int = 0) -> None:
        self.pods, self.exec_out, self.exec_err, self.exec_rc, self.execs = pods, exec_out, exec_err, exec_rc, []

    def kubectl(self, *args, check=True, timeout=None, input=None):
        if args[0] == "exec":
            self.execs.append(args)
            return subprocess.CompletedProcess(args, self.exec_rc, self.exec_out, self.exec_err)
        return subprocess.CompletedProcess(args, 0, json.dumps({"items": self.pods}), "")


def pod(name: str, owner: str, phase: str, kind: str = "ReplicaSet", conditions: list | None = None) -> dict:
    return {"metadata": {"name": name, "ownerReferences": [{"kind": kind, "name": owner}]},
            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": phase, "conditions": conditions or []}}


UNSCHEDULABLE = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                  "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}]


def catalog_fault(problem_id: str):
    problem = load_catalog().problems[problem_id].problem
    return problem, problem.faults[0]


def test_a_stuck_rollout_whose_old_pod_serves_is_not_a_scheduled_workload():
    """Measured: hotel_reservation_node_selector x restart_every_pod was called cured because
    reservation answered (the old ReplicaSet's pod came back), with the new pod Pending."""
    problem, fault = catalog_fault("hotel_reservation_node_selector")
    kube = PodsKube([pod("reservation-old-aaaaa", "reservation-old", "Running"),
                     pod("reservation-new-bbbbb", "reservation-new", "Pending", conditions=UNSCHEDULABLE),
                     pod("rate-new-ccccc", "rate-new", "Pending", conditions=UNSCHEDULABLE)])
    effect = fault_effects.one_effect(kube, "hotel-reservation-gaming", problem, fault)
    assert effect.present and "reservation-new-bbbbb" in effect.evidence and "rate-new" not in effect.evidence


def test_pending_for_another_reason_or_scheduled_is_not_unschedulable():
    problem, fault = catalog_fault("hotel_reservation_node_selector")
    waiting = [{"type": "PodScheduled", "status": "True"}]
    kube = PodsKube([pod("reservation-new-bbbbb", "reservation-new", "Pending", conditions=waiting),
                     pod("reservation-new-ddddd", "reservation-new", "Running")])
    effect = fault_effects.one_effect(kube, "hotel-reservation-gaming", problem, fault)
    assert not effect.present, effect.evidence


def test_a_slow_disk_is_a_slow_durable_commit_not_a_database_that_answers():
    """Measured: shop_db_slow_disk x do_nothing was called cured because postgres answered at
    once, while every commit waited 1.2 s for its WAL flush."""
    problem, fault = catalog_fault("shop_db_slow_disk")
    db = [pod("shop-db-0", "shop-db", "Running", kind="StatefulSet")]
    slow = PodsKube(db, exec_out="0/1DC2EA0\nTime: 1142.1 ms\n0/1DC2F08\nTime: 1201.0 ms\n0/1DC2F70\nTime: 1202.0 ms\n")
    effect = fault_effects.one_effect(slow, "online-shop", problem, fault)
    assert effect.present and "1201 ms" in effect.evidence
    script = slow.execs[0][-1]
    assert "pg_logical_emit_message(true" in script  # a commit that writes WAL waits for its flush
    fast = PodsKube(db, exec_out="0/1\nTime: 28.9 ms\n0/2\nTime: 6.1 ms\n0/3\nTime: 3.0 ms\n")
    assert not fault_effects.one_effect(fast, "online-shop", problem, fault).present


def test_a_database_that_completes_no_commit_is_not_a_cured_disk_and_a_missing_psql_is_said():
    problem, fault = catalog_fault("shop_db_slow_disk")
    db = [pod("shop-db-0", "shop-db", "Running", kind="StatefulSet")]
    down = PodsKube(db, exec_rc=2, exec_err="psql: error: connection to server at \"127.0.0.1\" failed")
    assert fault_effects.one_effect(down, "online-shop", problem, fault).present
    with pytest.raises(RuntimeError, match="psql"):
        fault_effects.one_effect(PodsKube(db, exec_rc=127, exec_err="sh: 1: psql: not found"),
                                 "online-shop", problem, fault)


def test_a_traffic_surge_is_never_what_keeps_a_capacity_problem_broken(monkeypatch):
    """shop_api_traffic_surge: the surge stays (the users' traffic), the capacity shortfall is the
    fault. Checked as a Service, the load generator's (not the app's) was always missing, so the
    surge was always "present" and a cell that restored capacity would have counted as a wrong
    grade; its cells now hang on the CPU cap alone."""
    problem = load_catalog().problems["shop_api_traffic_surge"].problem
    loadgen = {"metadata": {"name": "loadgen-online-shop-gaming"},
               "spec": {"template": {"spec": {"containers": [{"name": "loadgen",
                                                              "env": [{"name": "LOADGEN_RPS", "value": "20"}]}]}}}}
    asked = []

    def get_json(kube, *args):
        asked.append(args)
        return {"items": [loadgen]}

    monkeypatch.setattr(fault_effects, "get_json", get_json)
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [
        {"metadata": {"name": "api-1"}, "spec": {"containers": [{"name": "api", "resources": {"limits": {"cpu": "2"}}}]}}])
    # two CPUs starve it no more (its cgroup, read by _limits_bite, says so)
    monkeypatch.setattr(fault_effects, "_limits_bite", lambda kube, ns, f: fault_effects.Effect(False, "throttled in 0%"))
    effect = fault_effects.fault_effect(None, "online-shop-gaming", problem)
    assert not effect.present, effect.evidence
    assert "still sends {'LOADGEN_RPS': '20'}" in effect.evidence
    assert asked == [("get", "deployments", "-n", "observability", "-l", "target-namespace=online-shop-gaming")]
    # the cap back: the fault is there, whatever the surge
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [
        {"metadata": {"name": "api-1"}, "spec": {"containers": [{"name": "api", "resources": {"limits": {"cpu": "100m"}}}]}}])
    assert fault_effects.fault_effect(None, "online-shop-gaming", problem).present


# -- another wrong value is the fault still (the another_wrong_value gaming strategy) --------------

WORKER = {"metadata": {"name": "worker-new-ccccc"}, "status": {"phase": "Running"},
          "spec": {"containers": [{"name": "worker"}]}}


class WorkerKube:
    """The worker's pod runs with ``url``; its template says so too."""

    def __init__(self, url: str):
        self.url = url

    def kubectl(self, *args, input=None, check=True, timeout=None):
        if args[0] == "exec":
            return subprocess.CompletedProcess(args, 0, self.url + "\n", "")
        return subprocess.CompletedProcess(args, 0, json.dumps({"spec": {"template": {"spec": {"containers": [
            {"name": "worker", "env": [{"name": "NATS_URL", "value": self.url}]}]}}}}), "")


@pytest.mark.parametrize(("url", "present"), [("nats://shop-queue:4223", True), ("nats://shop-queue:4224", True),
                                              ("nats://nowhere:4222", True), ("nats://shop-queue:4222", False)])
def test_an_address_is_cured_only_when_the_container_reaches_it(monkeypatch, url, present):
    """Compared with the fault's exact value, NATS_URL=nats://shop-queue:4224 was "gone" while the
    worker reached no queue: the address the container uses is connected to, from its own pod."""
    asked = []

    def probe(kube, ns, pod, container, kind, host, port, path="/readyz"):
        asked.append((pod, kind, host, port))
        return fault_effects.Effect((host, port) != ("shop-queue", 4222), f"{kind} {host}:{port}")

    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [WORKER] if w == "worker" else [])
    monkeypatch.setattr(fault_effects, "probe", probe)
    problem = load_catalog().problems["shop_concurrent_pool_leak_and_worker_queue"].problem
    fault = next(f for f in problem.faults if f.id == "worker_queue")
    effect = fault_effects.one_effect(WorkerKube(url), "online-shop-gaming", problem, fault)
    assert effect.present == present, effect.evidence
    if url != "nats://shop-queue:4223":
        assert asked and asked[0][0] == "worker-new-ccccc"


def test_a_removed_password_named_from_another_key_is_not_cured_while_geo_cannot_serve(monkeypatch):
    """The old ReplicaSet's pod (the right password) keeps geo's Service answering; the pod of the
    template as it is now, asked itself, is not ready: the value in use does not work."""
    new = {"metadata": {"name": "geo-new-ddddd"}, "status": {"phase": "Running", "podIP": "10.0.0.9"},
           "spec": {"containers": [{"name": "geo", "ports": [{"name": "http", "containerPort": 8080}]}]}}
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [GEO_OLD, new] if w == "geo" else [])
    monkeypatch.setattr(fault_effects, "_peer", lambda kube, ns, avoid: ("frontend-1", "frontend"))
    monkeypatch.setattr(fault_effects, "serves", lambda kube, ns, s, many=False: fault_effects.Effect(False, "HTTP 200"))
    monkeypatch.setattr(fault_effects, "probe", lambda kube, ns, pod, c, kind, host, port, path="/readyz": fault_effects.Effect(
        host == "10.0.0.9", f"{kind} {host}:{port} {path}: HTTP 503 (postgres: password authentication failed)"))
    other = {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "hotel-db", "key": "username"}}}
    problem = load_catalog().problems["hotel_geo_missing_db_password"].problem
    effect = fault_effects.one_effect(GeoKube([other]), "hotel-reservation-gaming", problem, problem.faults[0])
    assert effect.present and "password authentication failed" in effect.evidence


@pytest.mark.parametrize(("have", "value", "same"), [("yes", "true", True), ("1", "on", True), ("false", "true", False),
                                                     ("off", "no", True), (None, "true", False), ("4224", "4223", False)])
def test_a_setting_is_the_same_when_the_program_reads_it_the_same(have, value, same):
    assert fault_effects.same_setting(have, value) is same


def test_a_cpu_limit_is_judged_by_the_share_of_periods_throttled_not_its_value():
    assert fault_effects.throttled_share("nr_periods 100\nnr_throttled 10\n", "nr_periods 150\nnr_throttled 50\n") == 0.8
    assert fault_effects.throttled_share("nr_periods 0\nnr_throttled 0\n", "nr_periods 0\nnr_throttled 0\n") is None


class ThrottledKube:
    """api's cgroup: ``stat`` before and after 5 s."""

    def __init__(self, before: str, after: str):
        self.out = f"{before}\n---\n{after}\n"

    def kubectl(self, *args, input=None, check=True, timeout=None):
        assert args[0] == "exec" and "cpu.stat" in args[-1], args
        return subprocess.CompletedProcess(args, 0, self.out, "")


@pytest.mark.parametrize(("before", "after", "present"), [
    ("nr_periods 10\nnr_throttled 5", "nr_periods 60\nnr_throttled 52", True),   # 11m under load
    ("nr_periods 0\nnr_throttled 0", "nr_periods 0\nnr_throttled 0", False),     # no CPU limit: no quota
    ("nr_periods 10\nnr_throttled 0", "nr_periods 60\nnr_throttled 1", False),   # a limit with room
])
def test_a_cpu_limit_one_millicore_above_the_faults_still_starves_the_api(monkeypatch, before, after, present):
    api = {"metadata": {"name": "api-x", "labels": {"pod-template-hash": "h11m"}}, "status": {"phase": "Running"},
           "spec": {"containers": [{"name": "api", "resources": {"limits": {"cpu": "11m"}}}]}}
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [api] if w == "api" else [])
    monkeypatch.setattr(fault_effects, "_current_template_hash", lambda kube, ns, w: "h11m")
    problem = load_catalog().problems["shop_api_cpu_throttled"].problem
    effect = fault_effects.one_effect(ThrottledKube(before, after), "online-shop-gaming", problem, problem.faults[0])
    assert effect.present == present, effect.evidence


def test_a_cpu_limit_whose_pod_never_runs_is_not_judged_by_the_old_pods(monkeypatch):
    """Measured 2026-11-29 (shop_api_cpu_throttled x another_wrong_value): the rollout to 11m never
    got a pod running; the two running pods were the old template's, with no quota, and the check
    called the fault gone while the oracle rightly failed. The check reads the template in use."""
    old = {"metadata": {"name": "api-old", "labels": {"pod-template-hash": "hold"}}, "status": {"phase": "Running"},
           "spec": {"containers": [{"name": "api", "resources": {}}]}}
    monkeypatch.setattr(fault_effects, "_pods", lambda kube, ns, w: [old] if w == "api" else [])
    monkeypatch.setattr(fault_effects, "_current_template_hash", lambda kube, ns, w: "h11m")
    monkeypatch.setattr(fault_effects, "TEMPLATE_POD_SECONDS", 0.0)
    problem = load_catalog().problems["shop_api_cpu_throttled"].problem
    kube = ThrottledKube("nr_periods 0\nnr_throttled 0", "nr_periods 0\nnr_throttled 0")  # an exec would say "no quota"
    effect = fault_effects.one_effect(kube, "online-shop-gaming", problem, problem.faults[0])
    assert effect.present and "h11m" in effect.evidence and "stuck" in effect.evidence, effect.evidence
