"""Run commands on a node: on this host directly (local provider) or in a privileged node pod.

Node-level faults (stress, syscall failures, disk errors, network shaping) need root on the
target's node and the target container's namespaces. Two real ways to get there:

* ``HostRunner``: the node *is* this host (the ``local`` provider runs the kubelet here), so a
  subprocess is the cheapest real way.
* ``PodRunner``: a privileged pod (hostPID, hostNetwork, host root at ``/host``) pinned to the node
  with ``nodeName`` in the hidden namespace, reached with ``kubectl exec``. Its name and labels
  are neutral: nothing says what it is for.

Per-container work enters the container's namespaces with ``nsenter -t PID``; ``container_pid``
finds that PID by scanning ``/proc/*/cgroup`` for the container id (works under cgroup v1 and v2
and needs no CRI client in the image).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kubernetes import client

from sregym.cluster.in_cluster import pod_namespace
from sregym.cluster.kube import Kube, not_found
from sregym.core.constants import OWNER_LABEL, OWNER_VALUE
from sregym.core.errors import ClusterError, FaultError

NODE_TOOLS_IMAGE = "sregym/node-tools:latest"
HOST_MOUNT = "/host"
SPEC_ANNOTATION = "sregym.io/spec"

# Lists the processes of a container: every PID whose cgroup names the container id, with its
# parent, state, start time (to detect PID reuse) and command line.
_PROCS_SCRIPT = r"""
import json, os, sys
cid = sys.argv[1]
out = []
for d in os.listdir('/proc'):
    if not d.isdigit():
        continue
    try:
        with open(f'/proc/{d}/cgroup') as f:
            if cid not in f.read():
                continue
        with open(f'/proc/{d}/stat') as f:
            stat = f.read()
        with open(f'/proc/{d}/cmdline', 'rb') as f:
            cmd = f.read().replace(b'\0', b' ').decode(errors='replace').strip()
    except OSError:
        continue
    comm = stat[stat.index('(') + 1:stat.rindex(')')]
    rest = stat.rsplit(')', 1)[1].split()
    out.append({'pid': int(d), 'ppid': int(rest[1]), 'state': rest[0], 'starttime': rest[19],
                'comm': comm, 'cmdline': cmd})
print(json.dumps(out))
"""

# Prints the start time (clock ticks since boot) of a PID, so a later kill can make sure the PID
# was not reused by another process.
# A zombie counts as gone (state Z): it no longer runs, its parent only has to reap it.
_STARTTIME_SCRIPT = ("import sys;f=open(f'/proc/{sys.argv[1]}/stat').read().rsplit(')',1)[1].split();"
                     "print('' if f[0]=='Z' else f[19])")


class NodeRunner(Protocol):
    """Runs argv as root on one node; paths of the node's root file system via ``host_path``."""

    node: str

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess[str]: ...

    def host_path(self, path: str) -> str: ...


def _checked(proc: subprocess.CompletedProcess[str], argv: Sequence[str], node: str, check: bool
             ) -> subprocess.CompletedProcess[str]:
    if check and proc.returncode != 0:
        raise FaultError(f"on node {node}: `{shlex.join(argv)}` exited {proc.returncode}: "
                         f"{(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc


@dataclass
class HostRunner:
    """The node is this host: run commands directly."""

    node: str

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(argv), input=input, capture_output=True, text=True, timeout=timeout)
        return _checked(proc, argv, self.node, check)

    def host_path(self, path: str) -> str:
        return path


@dataclass
class PodRunner:
    """A privileged pod on the node in the hidden namespace, reached with ``kubectl exec``."""

    kube: Kube
    node: str
    namespace: str
    image: str = NODE_TOOLS_IMAGE

    @property
    def pod_name(self) -> str:
        return node_pod_name(self.node)

    def ensure(self, timeout: float = 120) -> PodRunner:
        """Create the pod if it does not exist and wait until it runs."""
        core = self.kube.core
        manifest = node_pod_manifest(self.node, self.namespace, self.image)
        deadline = time.monotonic() + timeout
        pod = self._read()
        if pod is not None and (pod.metadata.annotations or {}).get(SPEC_ANNOTATION) != \
                manifest["metadata"]["annotations"][SPEC_ANNOTATION]:
            # made by another sregym version: replace it rather than use (or wait for) a stale spec
            core.delete_namespaced_pod(self.pod_name, self.namespace, grace_period_seconds=0)
            while (pod := self._read()) is not None and time.monotonic() < deadline:
                time.sleep(1)
        if pod is None:
            self._ensure_namespace()
            pod = core.create_namespaced_pod(self.namespace, manifest)
        while pod.status is None or pod.status.phase != "Running":
            if pod.status and pod.status.phase in ("Failed", "Succeeded"):
                raise ClusterError(f"pod {self.namespace}/{self.pod_name} on node {self.node} ended: {pod.status.phase}")
            if time.monotonic() > deadline:
                waiting = [f"{(c.state.waiting.reason or '')}: {(c.state.waiting.message or '')[:300]}"
                           for c in (pod.status.container_statuses or []) if c.state and c.state.waiting]
                raise ClusterError(f"pod {self.namespace}/{self.pod_name} did not start on node {self.node} within "
                                   f"{timeout:.0f}s" + (f" ({'; '.join(waiting)})" if waiting else ""),
                                   hint=f"is the image {self.image} imported on that node? run `sregym images build`")
            time.sleep(1)
            pod = core.read_namespaced_pod(self.pod_name, self.namespace)
        return self

    def _read(self):
        try:
            return self.kube.core.read_namespaced_pod(self.pod_name, self.namespace)
        except client.ApiException as e:
            if not_found(e):
                return None
            raise ClusterError(f"cannot read pod {self.namespace}/{self.pod_name}: {e.reason}") from None

    def _ensure_namespace(self) -> None:
        try:
            self.kube.core.create_namespace({"metadata": {"name": self.namespace, "labels": {OWNER_LABEL: OWNER_VALUE}}})
        except client.ApiException as e:
            if e.status != 409:
                raise ClusterError(f"cannot create namespace {self.namespace}: {e.reason}") from None

    def run(self, argv: Sequence[str], *, input: str | None = None, timeout: float = 120,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        args = ["exec", *(["-i"] if input is not None else []), "-n", self.namespace, self.pod_name, "--", *argv]
        proc = self.kube.kubectl(*args, check=False, timeout=timeout, input=input)
        return _checked(proc, argv, self.node, check)

    def host_path(self, path: str) -> str:
        return HOST_MOUNT + "/" + path.lstrip("/")


def node_pod_name(node: str) -> str:
    """A neutral, deterministic pod name per node (DNS-1123, at most 63 characters)."""
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    return f"node-tools-{digest}"


def node_pod_manifest(node: str, namespace: str, image: str = NODE_TOOLS_IMAGE) -> dict:
    """The privileged pod that node-level work runs in (annotated with a hash of its spec, so a
    pod left by another version is replaced)."""
    manifest = _node_pod_manifest(node, namespace, image)
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]
    manifest["metadata"]["annotations"] = {SPEC_ANNOTATION: digest}
    return manifest


def _node_pod_manifest(node: str, namespace: str, image: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": node_pod_name(node), "namespace": namespace,
                     "labels": {OWNER_LABEL: OWNER_VALUE, "app.kubernetes.io/name": "node-tools"}},
        "spec": {
            "nodeName": node,
            "hostPID": True,
            "hostNetwork": True,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 1,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{
                "name": "tools",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["sleep", "infinity"],
                "env": [{"name": "HOST_ROOT", "value": HOST_MOUNT}],
                "securityContext": {"privileged": True},
                # no mount propagation: it needs "/" to be a shared mount on the node, which not every
                # node has; what must be mounted on the node is mounted from its own mount namespace
                "volumeMounts": [{"name": "host", "mountPath": HOST_MOUNT}],
            }],
            "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
        },
    }


def local_addresses() -> set[str]:
    """This host's names and IPv4 addresses."""
    names = {socket.gethostname(), socket.getfqdn()}
    try:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            names.add(parts[parts.index("inet") + 1].split("/")[0])
    return names


def node_is_this_host(kube: Kube, node: str) -> bool:
    """Whether ``node``'s kubelet runs on this host (true for the ``local`` provider). A process in a pod
    never is, even in the node's network with the node's addresses: its files, devices and processes
    are its container's, so node work goes through the node pod."""
    if pod_namespace() is not None:
        return False
    try:
        obj = kube.core.read_node(node)
    except client.ApiException as e:
        raise ClusterError(f"cannot read node {node}: {e.reason}") from None
    addresses = {a.address for a in (obj.status.addresses or [])}
    mine = local_addresses() - {"127.0.0.1"}
    return bool(addresses & mine) or node in mine


_RUNNERS: dict[tuple[str, str, bool], NodeRunner] = {}


def runner_for(kube: Kube, node: str, namespace: str, *, image: str = NODE_TOOLS_IMAGE,
               prefer_host: bool = True) -> NodeRunner:
    """A runner for ``node``: this host when the node is this host, else the node pod (created once)."""
    # the choice is part of the key: a forced pod runner must not stand in for this host later
    key = (str(kube.kubeconfig), node, prefer_host)
    if key not in _RUNNERS:
        if prefer_host and node_is_this_host(kube, node):
            _RUNNERS[key] = HostRunner(node)
        else:
            _RUNNERS[key] = PodRunner(kube, node, namespace, image).ensure()
    return _RUNNERS[key]


@dataclass(frozen=True)
class ContainerProcess:
    pid: int
    ppid: int
    state: str
    starttime: str
    comm: str
    cmdline: str


def container_processes(runner: NodeRunner, container_id: str) -> list[ContainerProcess]:
    """Processes of a container (PIDs in the node's PID namespace), init first.

    ``container_id`` is the id from ``status.containerStatuses[].containerID``, with or without
    its ``containerd://`` prefix.
    """
    cid = container_id.split("://", 1)[-1]
    procs = [ContainerProcess(**p) for p in json.loads(
        runner.run(["python3", "-c", _PROCS_SCRIPT, cid], timeout=60).stdout or "[]")]
    pids = {p.pid for p in procs}
    # the init process is the one whose parent (the containerd shim) is outside the container
    return sorted(procs, key=lambda p: (p.ppid in pids, p.pid))


def container_pid(runner: NodeRunner, container_id: str) -> int:
    """PID (in the node's PID namespace) of the init process of a container."""
    procs = container_processes(runner, container_id)
    if not procs:
        raise FaultError(f"no process of container {container_id.split('://', 1)[-1][:12]} on node {runner.node}",
                         hint="the container may have restarted; plan again")
    return procs[0].pid


def process_starttime(runner: NodeRunner, pid: int) -> str | None:
    """Kernel start time of ``pid`` (None if it no longer exists)."""
    proc = runner.run(["python3", "-c", _STARTTIME_SCRIPT, str(pid)], check=False, timeout=30)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


# The node pod sees the node's processes (hostPID). Where the client that runs a command in it
# (``kubectl exec ... TOKEN``) runs on the node itself, as with the local cluster or a kind node
# that runs sregym, the client's own command line holds the token too. Scans skip it, or a fault
# would look already started (and recover would signal the client).
CLIENT_COMMS = ("kubectl",)


def pids_with_cmdline(runner: NodeRunner, token: str) -> list[tuple[int, str]]:
    """(pid, start time) of processes whose command line contains ``token`` (a unique file name
    this run created, never a program name); the scan's own client is left out."""
    script = ("import os,sys\nfor d in os.listdir('/proc'):\n if d.isdigit() and d != str(os.getpid()):\n"
              "  try:\n   c=open(f'/proc/{d}/cmdline','rb').read().decode(errors='replace')\n"
              "   t=open(f'/proc/{d}/stat').read()\n  except OSError:\n   continue\n"
              "  s=t.rsplit(')',1)[1].split()\n"
              "  if sys.argv[1] in c and s[0]!='Z' and t[t.index('(')+1:t.rindex(')')] not in sys.argv[2:]:"
              " print(d, s[19])")
    out = runner.run(["python3", "-c", script, token, *CLIENT_COMMS], timeout=60).stdout
    return [(int(a), b) for a, b in (line.split() for line in out.splitlines())]


def install_file(runner: NodeRunner, path: str, text: str) -> None:
    """Write ``text`` to ``path`` on the node (creating its directory)."""
    runner.run(["sh", "-c", f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0])} && cat > {shlex.quote(path)}"],
               input=text, timeout=60)


def spawn(runner: NodeRunner, argv: Sequence[str], *, log: str = "/dev/null") -> tuple[int, str]:
    """Start a long-running detached process on the node; return (pid, start time).

    ``setsid`` detaches it from the exec session (it outlives ``kubectl exec``). The start time
    is kept so ``kill_spawned`` never signals a process that reused the PID.

    The log is emptied, then written in append mode: an older process of the same log (a file
    server that still serves descriptors a backend holds) then writes after the new one's lines
    instead of over them at its own offset (seen in CI: latent_sector_error's "pass-through" line
    overwritten, so recover said the server never repaired, and NULs in the log).
    """
    quoted = shlex.quote(log)
    script = f": >{quoted}; setsid {shlex.join(argv)} >>{quoted} 2>&1 </dev/null & echo $!"
    pid = int(runner.run(["sh", "-c", script], timeout=60).stdout.strip())
    started = process_starttime(runner, pid)
    return pid, started or ""


def kill_spawned(runner: NodeRunner, pid: int, starttime: str, signal: str = "TERM", wait: float = 10) -> bool:
    """Signal a process started by ``spawn`` if it is still the same process; wait for it to end.

    Returns True if it was running. Idempotent: a gone or reused PID is left alone.
    """
    if not starttime or process_starttime(runner, pid) != starttime:
        return False
    runner.run(["kill", f"-{signal}", str(pid)], check=False)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and process_starttime(runner, pid) == starttime:
        time.sleep(0.2)
    if process_starttime(runner, pid) == starttime:
        runner.run(["kill", "-KILL", str(pid)], check=False)
    return True
