"""Whether a problem's fault is really still there, judged by its effect on the live system and
never by the injector's own ``verify`` (the anti-gaming matrix decides each cell's expectation by
this): a connection from the target pod to its partitioned peer, the target's Service answering
from another pod, the value the running containers actually use, the bytes of a file on the bad
volume, a stress process in the target pod's cgroup.

Each check runs against what runs now (new pods after a restart included), reads the world through
kubectl exec and the node's /proc, and says what it saw. Families grouped here (``family``) are
what the matrix covers: every primitive that a problem uses, by layer.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml
from shop_users import order_histories
from wrong_values import FALSY, TRUTHY

from sregym.cluster.kube import helm_path
from sregym.core.constants import LOADGEN_NAMESPACE, LOADGEN_TARGET_LABEL

# Run in a pod of the app's own Python image: one connection-level check, JSON on stdout.
PROBE = r"""
import json, socket, sys, time, urllib.request
kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
path = sys.argv[4] if len(sys.argv) > 4 else "/readyz"
def once(kind):
    if kind == "dns":
        return f"resolved {socket.getaddrinfo(host, port)[0][4][0]}"
    s = socket.create_connection((host, port), timeout=3)
    s.settimeout(3)
    if kind == "tcp":
        return "connected"
    if kind == "redis":  # answering at all (NOAUTH included) is alive; MISCONF or silence is not
        s.sendall(b"PING\r\n"); r = s.recv(64)
        assert r.startswith((b"+PONG", b"-NOAUTH")), r
        return r.decode().strip()
    if kind == "nats":
        r = s.recv(16)
        assert r.startswith(b"INFO"), r
        return "nats INFO"
    if kind == "memcached":
        s.sendall(b"version\r\n"); r = s.recv(64)
        assert r.startswith(b"VERSION"), r
        return r.decode().strip()
    if kind == "postgres":  # SSLRequest: a live postgres answers one byte at once
        s.sendall(bytes.fromhex("0000000804d2162f")); r = s.recv(1)
        assert r in (b"N", b"S"), r
        return "postgres answers"
    s.close()
    r = urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=3)
    return f"HTTP {r.status} {path}"
def main():
    if not kind.startswith("many:"):
        return once(kind)
    inner, slow = kind.split(":", 1)[1], 0  # a slow or lossy link: one answer gets through, most come late
    for _ in range(20):
        t = time.monotonic()
        try:
            once(inner)
        except Exception:
            slow += 1; continue
        slow += time.monotonic() - t > 0.5
    assert slow < 3, f"{slow}/20 {inner} exchanges failed or took over 0.5 s"
    return f"{20 - slow}/20 {inner} exchanges answered within 0.5 s"
try:
    print(json.dumps({"ok": True, "detail": main()}))
except Exception as e:
    print(json.dumps({"ok": False, "detail": f"{type(e).__name__}: {e}"}))
"""

PORT_KINDS = {6379: "redis", 11211: "memcached", 5432: "postgres", 4222: "nats"}
# faults whose cause lives in or under the pod: a restart must not cure them (DESIGN.md invariants)
# (a hung process, ``process_signal``, is cured by a restart as its real cause, a deadlock, would be)
# the Python images the apps' services run; a check runs from a pod of one (an app missing here
# would leave every check waiting PEER_WAIT_SECONDS for a pod that cannot exist)
PYTHON_IMAGES = {"hotel", "shop", "pipeline"}
# How long a check waits for a running pod of the app to check from (pods restarting after a strategy).
PEER_WAIT_SECONDS = 120
POD_SCOPED = {"network_partition", "packet_loss", "bandwidth_limit", "dns_failure", "network_latency",
              "resource_stress", "syscall_failure", "latent_sector_error", "disk_full"}
LAYER_FAMILY = {"kubernetes": "Kubernetes objects", "control-plane": "control plane", "application": "application config",
                "os": "OS",
                "network": "network", "hardware": "hardware", "load": "load"}


@dataclass
class Effect:
    present: bool
    evidence: str


def graded_faults(problem) -> list:
    """The faults whose effect must be gone for the incident to be over: the root causes (for a
    metastable problem, its vulnerabilities: the trigger is transient by design)."""
    return problem.root_cause_faults or [f for f in problem.faults if f.role == "vulnerability"]


def family(problem) -> tuple[str, str]:
    """(layer family, primitive): metastable and concurrent problems are families of their own."""
    primitive = "+".join(sorted({f.injector for f in graded_faults(problem)}))
    if problem.tags.failure_mode == "metastable":
        return "metastable", primitive
    if len(problem.root_cause_faults) > 1:
        return "concurrent", primitive
    return LAYER_FAMILY.get(problem.tags.layer.value, problem.tags.layer.value), primitive


def get_json(kube, *args: str) -> dict:
    return json.loads(kube.kubectl(*args, "-o", "json").stdout)


def _pods(kube, ns: str, workload: str) -> list[dict]:
    """Running pods whose controller chain leads to ``workload`` (by the name prefix its ReplicaSets
    and StatefulSet ordinals give)."""
    return sorted(_pods_in_phase(kube, ns, workload, "Running"), key=lambda p: p["metadata"]["name"])


def _pods_in_phase(kube, ns: str, workload: str, phase: str) -> list[dict]:
    out = []
    for p in get_json(kube, "get", "pods", "-n", ns)["items"]:
        owners = p["metadata"].get("ownerReferences") or [{}]
        if p["metadata"].get("deletionTimestamp") or (p.get("status") or {}).get("phase") != phase:
            continue
        if owners[0].get("kind") == "StatefulSet" and owners[0].get("name") == workload or \
                owners[0].get("kind") == "ReplicaSet" and owners[0].get("name", "").rsplit("-", 1)[0] == workload:
            out.append(p)
    return out


def app_image(kube, ns: str) -> str | None:
    for kind in ("deployments", "statefulsets"):
        for w in get_json(kube, "get", kind, "-n", ns)["items"]:
            for c in w["spec"]["template"]["spec"]["containers"]:
                # the Python images the apps' services run (PYTHON_IMAGES); the load generator is no
                # longer in the app's namespace, so it cannot be the fallback
                if c["image"].rsplit("/", 1)[-1].split(":")[0] in PYTHON_IMAGES:
                    return c["image"]
    return None


def _python_pod(kube, ns: str, avoid: str | None = None) -> tuple[str, str] | None:
    """(pod, container) of a running pod of the app's Python image, not of ``avoid``: a ready one
    if any, else one whose container runs though not ready. A check only opens a connection from
    it, which needs the container running, not ready; asking for readiness made the checks wait
    ``PEER_WAIT_SECONDS`` where the fault left no app pod ready (an admission webhook refusing
    every new pod while its stores' pods were replaced: every service's /readyz failed)."""
    image = app_image(kube, ns)
    running = []
    for p in get_json(kube, "get", "pods", "-n", ns)["items"]:
        if (p.get("status") or {}).get("phase") != "Running" or p["metadata"].get("deletionTimestamp"):
            continue
        if avoid and p["metadata"]["name"].startswith(f"{avoid}-"):
            continue
        statuses = {s["name"]: s for s in p["status"].get("containerStatuses", [])}
        for c in p["spec"]["containers"]:
            st = statuses.get(c["name"]) or {}
            if c["image"] == image and st.get("ready"):
                return p["metadata"]["name"], c["name"]
            if c["image"] == image and "running" in (st.get("state") or {}):
                running.append((p["metadata"]["name"], c["name"]))
    return running[0] if running else None


def probe(kube, ns: str, pod: str, container: str, kind: str, host: str, port: int,
          path: str = "/readyz") -> Effect:
    """Run one connection-level check from ``pod`` (``path``: where an HTTP server says it is ready);
    ``present`` is True when it failed."""
    proc = kube.kubectl("exec", "-n", ns, pod, "-c", container, "--", "python3", "-c", PROBE, kind, host, str(port),
                        path, check=False, timeout=120)
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return Effect(True, f"{kind} {host}:{port} from {pod}: no answer ({proc.stderr.strip()[:200]})")
    return Effect(not out["ok"], f"{kind} {host}:{port} from {pod}: {out['detail']}")


def helm(kube, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run helm against the same cluster as ``kube``."""
    cmd = [helm_path(), *args]
    if kube.kubeconfig:
        cmd += ["--kubeconfig", str(kube.kubeconfig)]
    if kube.context:
        cmd += ["--kube-context", kube.context]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if check and proc.returncode:
        raise RuntimeError(f"helm {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def release_of(kube, ns: str) -> dict:
    """The app's Helm release in ``ns`` (name, revision)."""
    [release] = json.loads(helm(kube, "list", "-n", ns, "-o", "json").stdout)
    return release


def chart_object(kube, ns: str, kind: str, name: str) -> dict | None:
    """The object as the chart defines it, whatever the live object says now."""
    manifest = helm(kube, "get", "manifest", release_of(kube, ns)["name"], "-n", ns).stdout
    for doc in yaml.safe_load_all(manifest):
        if doc and doc.get("kind") == kind and doc["metadata"]["name"] == name:
            return doc
    return None


def chart_service(kube, ns: str, service: str) -> dict | None:
    """The Service as the chart defines it, whatever the live object says now."""
    return chart_object(kube, ns, "Service", service)


def service_port(kube, ns: str, service: str) -> int | None:
    """The port the chart gives the Service (what its clients are configured for)."""
    doc = chart_service(kube, ns, service)
    return doc["spec"]["ports"][0]["port"] if doc else None


def foreign_backends(kube, ns: str, service: str) -> Effect:
    """Present when the Service's endpoints are pods its chart's selector does not select: a
    Service pointed at another workload answers, but with another component's answers (measured:
    geo's Service pointed at frontend's pods answered /readyz, while every hotel search failed)."""
    doc = chart_service(kube, ns, service)
    selector = (doc or {}).get("spec", {}).get("selector")
    if not selector:
        return Effect(False, f"the chart gives Service {service} no selector")
    labels = {p["metadata"]["name"]: p["metadata"].get("labels") or {}
              for p in get_json(kube, "get", "pods", "-n", ns)["items"]}
    slices = get_json(kube, "get", "endpointslices", "-n", ns, "-l", f"kubernetes.io/service-name={service}")["items"]
    backends = {(e.get("targetRef") or {}).get("name") for s in slices for e in s.get("endpoints") or []}
    # a pod already gone (the slice lags its deletion) is no one's
    foreign = sorted(b for b in backends if b in labels and not selector.items() <= labels[b].items())
    if foreign:
        return Effect(True, f"Service {service} sends to pods its chart does not select: {', '.join(foreign[:3])}")
    return Effect(False, f"Service {service}'s endpoints are its own pods")


# Where an HTTP Service is asked whether it serves, when not at ``/readyz``: the event pipeline's
# nginx gateway routes only the users' paths, so it is asked for a user's summary (through it to
# query, as the shop's lb passes ``/readyz`` through to web).
HTTP_PATHS = {"gateway": "/users/user-1/summary"}


def _peer(kube, ns: str, avoid: str) -> tuple[str, str] | None:
    """A running pod of the app's image to check from, not of ``avoid``, waiting up to
    ``PEER_WAIT_SECONDS`` (after a restart-everything strategy the pods come back)."""
    peer = _python_pod(kube, ns, avoid=avoid)
    deadline = time.monotonic() + PEER_WAIT_SECONDS
    while peer is None and time.monotonic() < deadline:
        time.sleep(3)
        peer = _python_pod(kube, ns, avoid=avoid)
    return peer


def serves(kube, ns: str, service: str, *, many: bool = False) -> Effect:
    """The component's Service answers as its kind of server should, from another pod, from the
    pods its chart selects (``foreign_backends``)."""
    port = service_port(kube, ns, service)
    if port is None:
        return Effect(True, f"the chart has no Service {service}")
    if app_image(kube, ns) is None:
        raise AssertionError(f"namespace {ns} runs no image of {sorted(PYTHON_IMAGES)}: add its app's image to "
                             "PYTHON_IMAGES (fault_effects.py)")
    peer = _peer(kube, ns, avoid=service)
    if peer is None:
        return Effect(True, f"no running pod of the app's image to check from (waited {PEER_WAIT_SECONDS}s)")
    kind = PORT_KINDS.get(port, "http")
    kind = f"many:{kind}" if many else kind
    answered = probe(kube, ns, *peer, kind, service, port, HTTP_PATHS.get(service, "/readyz"))
    if answered.present:
        return answered
    backed = foreign_backends(kube, ns, service)  # an answer from another component's pods is not service
    return Effect(backed.present, f"{answered.evidence}; {backed.evidence}" if backed.present else answered.evidence)


def _target_service(problem, fault) -> str:
    t = fault.target
    return t.name if t.kind in ("Deployment", "StatefulSet", "Service") and t.name else problem.ground_truth.component


def _from_target(kube, ns: str, fault, kind: str, host: str) -> Effect:
    pods = _pods(kube, ns, fault.target.name)
    if not pods:
        return Effect(True, f"no running pod of {fault.target.name}")
    port = service_port(kube, ns, host) or 53
    c = fault.target.container or pods[0]["spec"]["containers"][0]["name"]
    return probe(kube, ns, pods[0]["metadata"]["name"], c, kind, host, port)


def _declared_ports_answer(kube, ns: str, problem, fault) -> Effect:
    """Every running pod of the target answers at the number it declares for the named port (where a
    Service targeting the name sends), each pod asked directly, ready or not; then the Service
    serves. The Service alone is no check: the charts' readiness probes use the named port too,
    so a pod of the bad template never gets ready and the rollout stalls with the old pod serving
    (measured: geo's Service answered after every pod was restarted, the old ReplicaSet's pod
    back, while the Deployment's own pods could not serve)."""
    pods = _pods(kube, ns, fault.target.name)
    if not pods:
        return Effect(True, f"no running pod of {fault.target.name}")
    peer = _peer(kube, ns, avoid=fault.target.name)
    if peer is None:
        return Effect(True, f"no running pod of the app's image to check from (waited {PEER_WAIT_SECONDS}s)")
    name, seen = fault.params.get("port_name"), []
    for p in pods:
        for c in p["spec"]["containers"]:
            if fault.target.container not in (None, c["name"]):
                continue
            for port in [x for x in c.get("ports") or [] if name in (None, x.get("name"))][:1]:
                number = port["containerPort"]
                answered = probe(kube, ns, *peer, "tcp", p["status"].get("podIP", ""), number)
                where = f"{p['metadata']['name']}/{c['name']} declares {port.get('name', 'its port')}={number}"
                if answered.present:
                    return Effect(True, f"{where}: {answered.evidence}")
                seen.append(where)
    served = serves(kube, ns, _target_service(problem, fault))
    return Effect(served.present, "; ".join([*seen, served.evidence]))


def _new_pod_admitted(kube, ns: str, problem, fault) -> Effect:
    """A new pod of the target, from its workload's pod template as it is now, passes admission
    (a server-side dry run: quotas, limit ranges and webhooks judge it, nothing is stored); then its
    Service serves. Running pods say nothing here: they were admitted before the quota or limit
    range and only their replacements are refused (measured: recreating the namespace's objects
    recreated the workload before the LimitRange, so its pod ran while the cap stood)."""
    t = fault.target
    try:
        w = get_json(kube, "get", t.kind.lower(), t.name, "-n", ns)
    except subprocess.CalledProcessError as e:
        return Effect(True, f"{t.kind}/{t.name} is gone: {e.stderr.strip()[:120]}")
    template = w["spec"]["template"]
    meta = {"generateName": f"{t.name}-", "namespace": ns, "labels": template["metadata"].get("labels", {})}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
    proc = kube.kubectl("create", "--dry-run=server", "-n", ns, "-f", "-", "-o", "name", input=json.dumps(pod),
                        check=False)
    if proc.returncode:
        return Effect(True, f"a new pod of {t.kind}/{t.name} is refused: {proc.stderr.strip()[:200]}")
    served = serves(kube, ns, _target_service(problem, fault))
    return Effect(served.present, f"a new pod of {t.kind}/{t.name} is admitted; {served.evidence}")


def _env_in_pods(kube, ns: str, workloads: list[str], key: str, value: str | None) -> Effect:
    """The value running containers see (env, or a file from the ConfigMap) still is the faulty one."""
    seen = []
    for w in workloads:
        for p in _pods(kube, ns, w):
            for c in p["spec"]["containers"]:
                proc = kube.kubectl("exec", "-n", ns, p["metadata"]["name"], "-c", c["name"], "--", "printenv", key,
                                    check=False, timeout=60)
                have = proc.stdout.strip() if proc.returncode == 0 else None
                seen.append(f"{p['metadata']['name']}/{c['name']}: {key}={have!r}")
                if same_setting(have, value) and (value is not None or proc.returncode == 1):
                    return Effect(True, "; ".join(seen))
    return Effect(False, "; ".join(seen) or f"no running pod of {', '.join(workloads)}")


def same_setting(have: str | None, value: str | None) -> bool:
    """The same setting to the program reading it: equal, or the same boolean spelled otherwise
    ("yes" for "true": the shop's flags read both as on)."""
    if have == value:
        return True
    if have is None or value is None:
        return False
    a, b = have.strip().lower(), value.strip().lower()
    return a in TRUTHY and b in TRUTHY or a in FALSY and b in FALSY


# host:port or scheme://host:port (several, comma-separated): a setting that names where to connect
ADDRESS = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?([A-Za-z0-9.-]+):(\d{1,5})$")


def addresses(value: str | None) -> list[tuple[str, int]]:
    """The (host, port) pairs a setting names, if it is an address (or a list of them)."""
    out = []
    for part in (value or "").split(","):
        m = ADDRESS.match(part.strip())
        if not m:
            return []
        out.append((m.group(1), int(m.group(2))))
    return out


def _declared_port(container: dict, name: str) -> int | None:
    """The number a container declares for a named port (None: it declares none by that name)."""
    return next((x["containerPort"] for x in container.get("ports") or [] if x.get("name") == name), None)


def _setting_works(kube, ns: str, problem, fault, workloads: list[str], key: str) -> Effect:
    """Whether the value the running containers use works, whatever it is: an address they connect
    to from their own pod answers, and each running pod answers its own /readyz (its HTTP port
    asked directly, from another pod). Compared with the fault's exact value only, another wrong value (port 4224 for 4223, a
    Secret's other key for the removed password) was called cured."""
    seen = []
    pods = {w: _pods(kube, ns, w) for w in workloads}
    for w in workloads:
        for p in pods[w]:
            c = next((c for c in p["spec"]["containers"] if c["name"] == (fault.target.container or c["name"])),
                     p["spec"]["containers"][0])
            proc = kube.kubectl("exec", "-n", ns, p["metadata"]["name"], "-c", c["name"], "--", "printenv", key,
                                check=False, timeout=60)
            for host, port in addresses(proc.stdout.strip()):
                answered = probe(kube, ns, p["metadata"]["name"], c["name"], "tcp", host, port)
                if answered.present:
                    return Effect(True, f"{p['metadata']['name']} uses {key}={proc.stdout.strip()}: {answered.evidence}")
                seen.append(answered.evidence)
    # each pod asked itself, not the Service: a stalled rollout's old pod serves the Service while
    # the pods of the template as it is now (the value under judgement) never get ready
    peer = None
    for w in workloads:
        for p in pods[w]:
            for c in p["spec"]["containers"]:
                port = _declared_port(c, "http")
                if port is None:
                    continue
                peer = peer or _peer(kube, ns, avoid=w)
                if peer is None:
                    return Effect(True, f"no running pod of the app's image to check from (waited {PEER_WAIT_SECONDS}s)")
                ready = probe(kube, ns, *peer, "http", p["status"].get("podIP", ""), port, "/readyz")
                if ready.present:
                    return Effect(True, f"{p['metadata']['name']}/{c['name']} is not ready: {ready.evidence}")
                seen.append(f"{p['metadata']['name']} ready")
    return Effect(False, "; ".join(seen) or "nothing to check the setting by")


def _template_env(kube, ns: str, fault, running: Effect) -> Effect:
    """The workload's pod template still gives the container the bad value (or lacks the entry the
    fault removed): its next pod gets it, whatever the running ones (an old ReplicaSet's pod of a
    stalled rollout) started with."""
    t, name, value = fault.target, fault.params["name"], fault.params.get("value")
    try:
        w = get_json(kube, "get", t.kind.lower(), t.name, "-n", ns)
    except subprocess.CalledProcessError as e:
        return Effect(True, f"{t.kind}/{t.name} is gone: {e.stderr.strip()[:120]}; {running.evidence}")
    containers = w["spec"]["template"]["spec"]["containers"]
    c = next((c for c in containers if c["name"] == (t.container or containers[0]["name"])), containers[0])
    entry = next((e for e in c.get("env") or [] if e["name"] == name), None)
    bad = entry is None if value is None else (entry or {}).get("value") == value
    shown = "no entry" if entry is None else entry.get("value", "from " + ", ".join(entry.get("valueFrom", {})))
    return Effect(bad, f"{running.evidence}; template of {t.kind}/{t.name}: {name}: {shown}"
                       + (" (the next pod gets it)" if bad else ""))


def _stored_setting(kube, ns: str, fault, running: Effect) -> Effect:
    """The ConfigMap or Secret still holds the bad value: the next pod of its users reads it, however
    the running ones started (measured: ``rollout_undo`` sent api back to the ReplicaSet before the
    fault's restart, whose pod still ran with the old value while the ConfigMap said the bad one)."""
    t, key, value = fault.target, fault.params["key"], fault.params.get("value")
    try:
        data = get_json(kube, "get", t.kind.lower(), t.name, "-n", ns).get("data") or {}
    except subprocess.CalledProcessError as e:
        return Effect(True, f"{t.kind}/{t.name} is gone: {e.stderr.strip()[:120]}; {running.evidence}")
    stored = data.get(key)
    if stored is not None and t.kind == "Secret":
        stored = base64.b64decode(stored).decode(errors="replace")
    where = f"{t.kind}/{t.name} {key}={stored!r}"
    bad = same_setting(stored, value)
    return Effect(bad, f"{running.evidence}; {where}" + (" (the next pod reads it)" if bad else ""))


def _redis_takes_writes(kube, ns: str, fault) -> Effect:
    """A write to the target Redis, from inside its own container with its own password, is refused
    (a server started with a bad memory limit or policy still answers a ping, and rewrites its
    process title, so neither a ping nor its command line says whether the flags still hold)."""
    # two writes a moment apart, then the delete: Redis answers OK to a write before its append to
    # the file system fails, and refuses the next ones with MISCONF (a full volume)
    cli = 'redis-cli -p "$0" -a "$REDIS_PASSWORD" --no-auth-warning'
    script = f"{cli} set healthcheck ok; sleep 2; {cli} set healthcheck ok; {cli} del healthcheck"
    seen = []
    for p in _pods(kube, ns, fault.target.name):
        c = next(c for c in p["spec"]["containers"] if c["name"] == (fault.target.container or c["name"]))
        port = str(((c.get("ports") or [{}])[0]).get("containerPort", 6379))
        proc = kube.kubectl("exec", "-n", ns, p["metadata"]["name"], "-c", c["name"], "--", "sh", "-c", script, port,
                            check=False, timeout=60)
        answer = (proc.stdout.strip() or proc.stderr.strip())[:160]
        seen.append(f"{p['metadata']['name']}: {answer!r}")
        if proc.stdout.split()[:3] != ["OK", "OK", "1"]:
            return Effect(True, "; ".join(seen))
    return Effect(False, "; ".join(seen) or f"no running pod of {fault.target.name}")


# a volume this full is still the fault (it fills it to 100%), whatever a process on it answers
FULL_PERCENT = 90


def _volume_full(kube, ns: str, fault) -> Effect:
    """The target's volume is still (nearly) full, by ``df`` in its container; or, where Redis
    serves from it, Redis refuses writes. Redis on a full volume answers a ping until it tries to
    append (measured: the check asked whether it answers and called the fault cured with /data 100%
    full), and a fresh Redis takes a few writes into its file's last page (measured after a restart
    re-filled the new pod's volume): neither alone says the volume has room again."""
    t, path = fault.target, fault.params["path"]
    seen = []
    for p in _pods(kube, ns, t.name):
        containers = p["spec"]["containers"]
        c = next((c for c in containers if c["name"] == (t.container or c["name"])), containers[0])
        proc = kube.kubectl("exec", "-n", ns, p["metadata"]["name"], "-c", c["name"], "--", "df", "-P", path,
                            check=False, timeout=60)
        rows = proc.stdout.strip().splitlines()
        used = rows[-1].split()[4] if len(rows) > 1 and len(rows[-1].split()) > 4 else "?"
        seen.append(f"{p['metadata']['name']}: {path} {used} used")
        if not used.rstrip("%").isdigit() or int(used.rstrip("%")) >= FULL_PERCENT:
            return Effect(True, "; ".join(seen))
    if not seen:
        return Effect(True, f"no running pod of {t.name}")
    writes = _redis_takes_writes(kube, ns, fault) if _serves_redis(kube, ns, fault) else Effect(False, "")
    return Effect(writes.present, "; ".join([*seen, writes.evidence] if writes.evidence else seen))


def _serves_redis(kube, ns: str, fault) -> bool:
    """Whether the target's container serves Redis (its first port is Redis's)."""
    for p in _pods(kube, ns, fault.target.name)[:1]:
        c = next((c for c in p["spec"]["containers"] if c["name"] == (fault.target.container or c["name"])), {})
        return PORT_KINDS.get(((c.get("ports") or [{}])[0]).get("containerPort")) == "redis"
    return False


def _users_of(kube, ns: str, name: str) -> list[str]:
    """Workloads whose pod template names ``name`` (a ConfigMap or Secret they read)."""
    users = []
    for kind in ("deployments", "statefulsets"):
        for w in get_json(kube, "get", kind, "-n", ns)["items"]:
            if f'"{name}"' in json.dumps(w["spec"]["template"]["spec"]):
                users.append(w["metadata"]["name"])
    return users


def _limits(kube, ns: str, fault) -> Effect:
    pods = _pods(kube, ns, fault.target.name)
    want = {k: v for k, v in (("cpu", fault.params.get("cpu")), ("memory", fault.params.get("memory"))) if v}
    for p in pods:
        for c in p["spec"]["containers"]:
            if fault.target.container in (None, c["name"]):
                limits = (c.get("resources") or {}).get("limits") or {}
                if all(limits.get(k) == v for k, v in want.items()):
                    return Effect(True, f"{p['metadata']['name']}/{c['name']} runs with limits {limits}")
    return Effect(False, f"no running pod of {fault.target.name} has limits {want}")


def _users_traffic(kube, ns: str, fault) -> Effect:
    """A load surge is the users' own traffic: it stays for the whole episode (the agent cannot
    reach the load generator), so what must be gone is the shortfall it meets (the problem's other
    faults, such as a CPU cap), never the surge. Checked as any Service, it was always "present"
    (the load generator's Service is not the app's): every fix of a capacity problem would have
    counted as a wrong grade. Never present; the evidence says whether the surge still runs."""
    lg_ns = fault.target.namespace or LOADGEN_NAMESPACE
    found = get_json(kube, "get", "deployments", "-n", lg_ns, "-l", f"{LOADGEN_TARGET_LABEL}={ns}")["items"]
    if len(found) != 1:
        return Effect(False, f"{len(found)} load generators in {lg_ns} drive {ns}: no surge to tell")
    lg = found[0]
    env = {e["name"]: e.get("value") for c in lg["spec"]["template"]["spec"]["containers"] for e in c.get("env") or []}
    surge = dict(fault.params.get("env") or {})
    now = {k: env.get(k) for k in surge}
    return Effect(False, f"the users' traffic, never the fault to cure: {lg['metadata']['name']} "
                         + (f"still sends {surge}" if now == surge else f"no longer sends {surge} (now {now})"))


def _probe_spec(kube, ns: str, problem, fault) -> Effect:
    port, path = fault.params.get("port", 1), fault.params.get("path")
    for p in _pods(kube, ns, fault.target.name):
        for c in p["spec"]["containers"]:
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                pr = c.get(kind) or {}
                http = pr.get("httpGet") or {}
                if (pr.get("tcpSocket") or {}).get("port") == port or (http.get("port") == port
                                                                        and (path is None or http.get("path") == path)):
                    return Effect(True, f"{p['metadata']['name']}/{c['name']} runs with {kind} on port {port}")
    effect = serves(kube, ns, _target_service(problem, fault))
    return Effect(effect.present, f"no running pod has the broken probe; {effect.evidence}")


def _and_works(exact: Effect, works: Effect) -> Effect:
    """The exact value is gone; whether what replaced it works decides."""
    return Effect(works.present, f"{exact.evidence}; {works.evidence}")


PULL_ERRORS = {"ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName"}


def _image_unavailable(kube, ns: str, fault) -> Effect:
    """A pod of the target waits for an image that is not there (whatever its tag)."""
    waiting = [f"{p['metadata']['name']}: {s['state']['waiting']['reason']}"
               for p in _pods_in_phase(kube, ns, fault.target.name, "Pending")
               for s in p["status"].get("containerStatuses") or []
               if ((s.get("state") or {}).get("waiting") or {}).get("reason") in PULL_ERRORS]
    return Effect(bool(waiting), "; ".join(waiting) or "no pod waits for its image")


def _probes_answer(kube, ns: str, fault) -> Effect:
    """Each running pod of the target answers where its probe of the fault's kind checks (a TCP
    connect, or an HTTP GET of the probe's path), from another pod: a probe on another port where
    nothing listens fails as the fault's did."""
    kind = f"{fault.params.get('probe', 'readiness')}Probe"
    peer = _peer(kube, ns, avoid=fault.target.name)
    if peer is None:
        return Effect(True, f"no running pod of the app's image to check from (waited {PEER_WAIT_SECONDS}s)")
    seen = []
    for p in _pods(kube, ns, fault.target.name):
        for c in p["spec"]["containers"]:
            pr = c.get(kind) or {}
            check = pr.get("httpGet") or pr.get("tcpSocket")
            if not check:
                continue
            port = check.get("port")
            if isinstance(port, str):  # a named port: the number the container declares for it
                port = _declared_port(c, port)
            if port is None:
                return Effect(True, f"{p['metadata']['name']}/{c['name']} {kind} names a port it does not declare")
            how = ("http", pr["httpGet"].get("path") or "/") if pr.get("httpGet") else ("tcp", "/")
            answered = probe(kube, ns, *peer, how[0], p["status"].get("podIP", ""), port, how[1])
            where = f"{p['metadata']['name']}/{c['name']} {kind} on {port}"
            if answered.present:
                return Effect(True, f"{where}: {answered.evidence}")
            seen.append(f"{where} answers")
    return Effect(False, "; ".join(seen) or f"no running pod of {fault.target.name} has a {kind}")


# a container throttled in this share of its CPU periods is starved (the chart's services run with no
# CPU limit, so none is throttled; 10m or 11m under the load generator's traffic: most periods)
THROTTLED_SHARE = 0.2
CPU_STAT = "cat /sys/fs/cgroup/cpu.stat 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.stat"


def throttled_share(before: str, after: str) -> float | None:
    """The share of CPU periods throttled between two cpu.stat readings (None: no quota, no periods)."""
    def read(text: str) -> dict[str, int]:
        return {k: int(v) for k, v in (line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
                if v.isdigit()}

    a, b = read(before), read(after)
    periods = b.get("nr_periods", 0) - a.get("nr_periods", 0)
    return (b.get("nr_throttled", 0) - a.get("nr_throttled", 0)) / periods if periods > 0 else None


# how long the CPU check waits for a running pod of the template the workload is rolling to
TEMPLATE_POD_SECONDS = 60.0


def _current_template_hash(kube, ns: str, workload: str) -> str | None:
    """The ``pod-template-hash`` of a Deployment's ReplicaSet at its current revision (None for a
    StatefulSet or when it cannot be read)."""
    found = kube.kubectl("get", "deployment", workload, "-n", ns, "-o", "json", check=False)
    if found.returncode != 0:
        return None
    revision = (json.loads(found.stdout)["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision")
    for rs in get_json(kube, "get", "replicasets", "-n", ns)["items"]:
        meta = rs["metadata"]
        if any(o.get("kind") == "Deployment" and o.get("name") == workload for o in meta.get("ownerReferences") or []) \
                and (meta.get("annotations") or {}).get("deployment.kubernetes.io/revision") == revision:
            return (meta.get("labels") or {}).get("pod-template-hash")
    return None


def _limits_bite(kube, ns: str, fault) -> Effect:
    """Whether the limits the target runs with still starve it, whatever their value: a CPU limit
    throttles it in most periods (over 5 s, from its own cgroup), a memory limit has OOM-killed a
    running pod's container. Compared with the fault's exact value only, a limit 1m above it was
    called cured. The CPU limit is read from the pods of the template in use: a rollout to 11m
    whose pod never ran left only the old pods (no quota), and the check called the fault gone."""
    current = None
    if fault.params.get("cpu"):
        current = _current_template_hash(kube, ns, fault.target.name)
        deadline = time.monotonic() + TEMPLATE_POD_SECONDS
        while current and not [p for p in _pods(kube, ns, fault.target.name)
                               if (p["metadata"].get("labels") or {}).get("pod-template-hash") == current]:
            if time.monotonic() >= deadline:
                return Effect(True, f"no pod of {fault.target.name}'s template in use (pod-template-hash "
                                    f"{current}) runs after {TEMPLATE_POD_SECONDS:.0f} s: its rollout is stuck")
            time.sleep(3)
    seen = []
    for p in _pods(kube, ns, fault.target.name):
        for c in p["spec"]["containers"]:
            if fault.target.container not in (None, c["name"]):
                continue
            name = f"{p['metadata']['name']}/{c['name']}"
            if fault.params.get("memory"):
                killed = [s for s in p["status"].get("containerStatuses") or [] if s["name"] == c["name"]
                          and ((s.get("lastState") or {}).get("terminated") or {}).get("reason") == "OOMKilled"]
                if killed:
                    return Effect(True, f"{name} was OOM-killed (limits {c.get('resources', {}).get('limits')})")
                seen.append(f"{name}: no OOM kill")
            if fault.params.get("cpu"):
                if current and (p["metadata"].get("labels") or {}).get("pod-template-hash") != current:
                    continue  # an old pod, going once the rollout ends
                proc = kube.kubectl("exec", "-n", ns, p["metadata"]["name"], "-c", c["name"], "--", "sh", "-c",
                                    f"{CPU_STAT}; echo ---; sleep 5; {CPU_STAT}", check=False, timeout=60)
                before, _, after = proc.stdout.partition("---")
                share = throttled_share(before, after)
                if share is not None and share >= THROTTLED_SHARE:
                    return Effect(True, f"{name} throttled in {share:.0%} of its CPU periods over 5 s "
                                        f"(limits {c.get('resources', {}).get('limits')})")
                seen.append(f"{name}: " + ("no CPU quota" if share is None else f"throttled in {share:.0%} of periods"))
    return Effect(False, "; ".join(seen) or f"no running pod of {fault.target.name}")


def _bad_blocks(kube, ns: str, fault) -> Effect:
    pods = _pods(kube, ns, fault.target.name)
    if not pods:
        return Effect(True, f"no running pod of {fault.target.name}")
    for path in fault.params["paths"]:
        proc = kube.kubectl("exec", "-n", ns, pods[0]["metadata"]["name"], "-c", fault.target.container or "", "--",
                            "sh", "-c", f"cat {path} > /dev/null", check=False, timeout=60)
        if proc.returncode != 0:
            return Effect(True, f"reading {path}: {proc.stderr.strip()[:200]}")
    return Effect(False, f"every byte of {', '.join(fault.params['paths'])} reads back")


def _stress(kube, ns: str, fault) -> Effect:
    """A stress process in the target pod's cgroup, seen in the node's /proc (the local cluster's
    node is this host; elsewhere this check cannot run and says so)."""
    pods = _pods(kube, ns, fault.target.name)
    if not pods:
        return Effect(True, f"no running pod of {fault.target.name}")
    uids = {p["metadata"]["uid"] for p in pods}
    forms = {u for uid in uids for u in (uid, uid.replace("-", "_"))}
    if not Path("/proc/1/cgroup").exists():
        raise RuntimeError("the stress check reads the node's /proc; run it on the local cluster's node")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            if not comm.startswith("stress"):
                continue
            cg = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if any(f in cg for f in forms):
            return Effect(True, f"{comm} (pid {pid}) runs in the cgroup of a {fault.target.name} pod")
    return Effect(False, f"no stress process in the cgroup of {', '.join(sorted(uids))}")


def _unschedulable_pods(kube, ns: str, fault) -> Effect:
    """Pods the scheduler refuses: present while a pod of the target is Pending with the
    scheduler's own ``PodScheduled=False/Unschedulable`` condition. The target answering says
    nothing: a stuck rollout keeps the old ReplicaSet's pod, and deleting pods brings it back (the
    matrix's restart cell on hotel_reservation_node_selector: users served, the new pod Pending)."""
    refused = []
    for pod in _pods_in_phase(kube, ns, fault.target.name, "Pending"):
        for c in pod["status"].get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
                refused.append(f"{pod['metadata']['name']}: {(c.get('message') or '')[:120]}")
    return Effect(bool(refused), "; ".join(refused) or f"every pod of {fault.target.name} is scheduled")


SLOW_COMMIT_MS = 200.0  # a durable commit on the local node's disk takes a few ms


def _commit_latency(kube, ns: str, fault, tries: int = 3) -> Effect:
    """A slow disk under PostgreSQL: present while a durable commit (a transaction that writes
    WAL, so its commit waits for the flush) takes long, timed by the database's own client in
    the target container (psql's ``\\timing``). Answering at all says nothing here: the database
    answers at once with the fault in place (measured: the matrix's first check said "gone" while
    checkouts took seconds)."""
    pods = _pods(kube, ns, fault.target.name)
    if not pods:
        return Effect(True, f"no running pod of {fault.target.name}")
    # a transactional WAL message: its commit writes WAL, so it waits for the flush (a bare
    # txid_current() writes none and commits without waiting)
    script = ('PGPASSWORD="$POSTGRES_PASSWORD" psql -h 127.0.0.1 -U "$POSTGRES_USER" -d postgres -Atq -c "\\timing on"'
              + " -c \"select pg_logical_emit_message(true, 'probe', 'x')\"" * tries)
    proc = kube.kubectl("exec", "-n", ns, pods[0]["metadata"]["name"], "-c", fault.target.container or "",
                        "--", "sh", "-c", script, check=False, timeout=120)
    times = [float(m) for m in re.findall(r"Time: ([0-9.]+) ms", proc.stdout)]
    if "psql" in proc.stderr and "not found" in proc.stderr:
        raise RuntimeError(f"the slow-disk check times PostgreSQL commits with psql; {fault.target.name}'s "
                           f"container {fault.target.container} has none")
    if proc.returncode != 0 or not times:  # the database completed no commit: users feel that too
        return Effect(True, f"no commit timed in {pods[0]['metadata']['name']}: {proc.stderr.strip()[:160]}")
    slow = sorted(times)[len(times) // 2]
    return Effect(slow >= SLOW_COMMIT_MS, f"median durable commit {slow:.0f} ms over {len(times)} "
                                          f"(slow from {SLOW_COMMIT_MS:.0f} ms): {', '.join(f'{t:.0f}' for t in times)}")


def one_effect(kube, ns: str, problem, fault) -> Effect:
    """The effect of one fault on what runs now."""
    inj, p = fault.injector, fault.params
    if inj == "network_partition":
        return _from_target(kube, ns, fault, "tcp", p["peer_service"])
    if inj == "network_policy_deny":
        return _from_target(kube, ns, fault, "tcp", p["dependency"])
    if inj == "dns_failure":
        return _from_target(kube, ns, fault, "dns", p.get("name") or "kubernetes.default.svc.cluster.local")
    if inj in ("packet_loss", "bandwidth_limit", "network_latency"):
        # one exchange passes a slow link (a 1-byte answer fits a 2 kbit/s bucket; 300 ms of delay
        # fits a 3 s timeout): measured, shop_db_bandwidth_limit's check said "gone" with the limit in place
        return serves(kube, ns, _target_service(problem, fault), many=True)
    if inj == "env_var":
        running = _env_in_pods(kube, ns, [fault.target.name], p["name"], p.get("value"))
        exact = running if running.present else _template_env(kube, ns, fault, running)
        return exact if exact.present else _and_works(exact, _setting_works(kube, ns, problem, fault,
                                                                            [fault.target.name], p["name"]))
    if inj == "config_value":
        users = p.get("restart") or _users_of(kube, ns, fault.target.name)
        running = _env_in_pods(kube, ns, users, p["key"], p.get("value"))
        return running if running.present else _stored_setting(kube, ns, fault, running)
    if inj == "resource_limits":
        exact = _limits(kube, ns, fault)
        return exact if exact.present else _and_works(exact, _limits_bite(kube, ns, fault))
    if inj == "load_surge":
        return _users_traffic(kube, ns, fault)
    if inj == "container_args" and any(k.startswith("--maxmemory") for k in fault.params["flags"]):
        return _redis_takes_writes(kube, ns, fault)
    if inj == "disk_full":
        return _volume_full(kube, ns, fault)
    if inj == "container_port":
        return _declared_ports_answer(kube, ns, problem, fault)
    if inj == "resource_quota":
        return _new_pod_admitted(kube, ns, problem, fault)
    if inj == "probe_misconfig":
        exact = _probe_spec(kube, ns, problem, fault)
        return exact if exact.present else _and_works(exact, _probes_answer(kube, ns, fault))
    if inj == "image_tag":
        w = get_json(kube, "get", fault.target.kind.lower(), fault.target.name, "-n", ns)
        images = [c["image"] for c in w["spec"]["template"]["spec"]["containers"]]
        bad = [i for i in images if i.endswith(f":{p.get('tag')}")] if p.get("tag") else []
        effect = serves(kube, ns, _target_service(problem, fault))
        # another tag never built: its pods wait for an image (the old ReplicaSet's pod serves on)
        pulls = _image_unavailable(kube, ns, fault)
        return Effect(bool(bad) or effect.present or pulls.present,
                      f"template images {images}; {effect.evidence}; {pulls.evidence}")
    if inj == "credential_rotation":  # the clients that read the Secret can no longer log in
        clients = [w for w in _users_of(kube, ns, p["secret"]) if w != fault.target.name]
        effects = [serves(kube, ns, w) for w in clients]
        return Effect(any(e.present for e in effects), "; ".join(e.evidence for e in effects) or "no client")
    if inj == "latent_sector_error":
        return _bad_blocks(kube, ns, fault)
    if inj == "slow_disk":
        return _commit_latency(kube, ns, fault)
    if inj == "unschedulable":
        return _unschedulable_pods(kube, ns, fault)
    if inj == "resource_stress":
        return _stress(kube, ns, fault)
    if inj == "syscall_failure":
        return _steadily_serves(kube, ns, problem, fault)
    if inj == "rbac_revoke":
        return _may(kube, ns, fault)
    # Kubernetes objects (replicas, scheduling, quota, ports, selectors), credentials, a hung or
    # failing process, a full disk: the component no longer answers as it should.
    return serves(kube, ns, _target_service(problem, fault))


def _may(kube, ns: str, fault) -> Effect:
    """A revoked grant: present while the API server refuses the workload's ServiceAccount the verb
    (``kubectl auth can-i`` as that account: the API server's own answer, through kubectl's code,
    not the injector's or the oracle's), read from the workload's pod template as it is now."""
    p = fault.params
    try:
        w = get_json(kube, "get", fault.target.kind.lower(), fault.target.name, "-n", ns)
    except subprocess.CalledProcessError as e:
        return Effect(True, f"{fault.target.kind}/{fault.target.name} is gone: {e.stderr.strip()[:120]}")
    account = w["spec"]["template"]["spec"].get("serviceAccountName") or "default"
    resource = f"{p['resource']}.{p['api_group']}" if p.get("api_group") else p["resource"]
    proc = kube.kubectl("auth", "can-i", p["verb"], resource, "-n", ns,
                        f"--as=system:serviceaccount:{ns}:{account}", check=False)
    answer = proc.stdout.strip() or proc.stderr.strip()[:120]
    return Effect(answer != "yes", f"can {account} {p['verb']} {resource}: {answer}")


def _restarts(kube, ns: str, name: str) -> int:
    return sum(s.get("restartCount", 0) for p in _pods(kube, ns, name) for s in p["status"].get("containerStatuses", []))


def _steadily_serves(kube, ns: str, problem, fault, samples: int = 8, every: float = 2.5) -> Effect:
    """A failing syscall shows over time, not in one connection (fsync errors make PostgreSQL
    PANIC and restart; between restarts it answers): present if any sample fails to answer or
    the target's containers restart while it is watched."""
    service = _target_service(problem, fault)
    before = _restarts(kube, ns, fault.target.name)
    failed = []
    for _ in range(samples):
        e = serves(kube, ns, service)
        if e.present:
            failed.append(e.evidence)
        time.sleep(every)
    restarted = _restarts(kube, ns, fault.target.name) - before
    present = bool(failed) or restarted > 0
    return Effect(present, f"{samples - len(failed)}/{samples} samples answered over {samples * every:.0f}s, "
                           f"{restarted} restart(s) of {fault.target.name} meanwhile"
                           + (f"; first failure: {failed[0]}" if failed else ""))


def fault_effect(kube, ns: str, problem) -> Effect:
    """Present when any graded fault's effect is still there."""
    effects = [(f.id, one_effect(kube, ns, problem, f)) for f in graded_faults(problem)]
    return Effect(any(e.present for _, e in effects),
                  "; ".join(f"{fid}: {'PRESENT' if e.present else 'gone'} ({e.evidence})" for fid, e in effects))


def chart_services(kube, ns: str) -> list[str]:
    manifest = helm(kube, "get", "manifest", release_of(kube, ns)["name"], "-n", ns).stdout
    return sorted(d["metadata"]["name"] for d in yaml.safe_load_all(manifest) if d and d.get("kind") == "Service")


def shop_order_histories(kube, ns: str) -> Effect:
    """Every shopper's order history through the shop's front (``web``), each shopper the shop's
    database names: a bad block under some archives fails only those shoppers, which no service's
    own health check shows."""
    peer = _python_pod(kube, ns, avoid="web")
    if peer is None:
        return Effect(True, "no running pod of the app's image to ask from")
    asked, failed = order_histories(kube, ns, *peer, f"http://web:{service_port(kube, ns, 'web')}")
    return Effect(bool(failed), f"order histories: {asked - len(failed)}/{asked} answer"
                                + (f"; {len(failed)} fail, first: {failed[0]}" if failed else ""))


# Paths users take that no Service's health check exercises, by the Services that show the app.
USER_PATHS = {frozenset({"web", "api", "shop-db"}): shop_order_histories}


def users_served(kube, ns: str) -> Effect:
    """Every Service of the chart (the load generator aside) answers as it should, from another pod,
    and the app's user paths that no health check covers work (``USER_PATHS``): ``present`` here
    means something users need is broken."""
    # the load generator is the grader's (its Service lives in the observability namespace now)
    services = [s for s in chart_services(kube, ns) if not s.startswith("loadgen")]
    checks = [(s, lambda s=s: serves(kube, ns, s)) for s in services]
    checks += [(check.__name__, lambda check=check: check(kube, ns)) for shows, check in USER_PATHS.items()
               if shows <= set(services)]
    # each check is its own kubectl exec from another pod: side by side, not one after another
    # (one at a time the users check took 10-60 s of a cell)
    with ThreadPoolExecutor(max_workers=8) as pool:
        effects = list(zip([name for name, _ in checks], pool.map(lambda c: c[1](), checks)))
    broken = [f"{s}: {e.evidence}" for s, e in effects if e.present]
    return Effect(bool(broken), "; ".join(broken) or "; ".join(
        [f"all of {len(services)} services answer"] + [e.evidence for s, e in effects if s not in services]))
