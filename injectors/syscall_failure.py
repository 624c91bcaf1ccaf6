"""Chosen system calls of the target's processes fail with a chosen errno (optionally only on a
path, optionally only a fraction of calls).

Mechanisms, best first:

* ``ebpf-override``: a bcc program on kprobes of the syscalls calls ``bpf_override_return`` for
  processes of the target's cgroup, at the chosen rate. Needs kprobes, CONFIG_BPF_KPROBE_OVERRIDE
  and kernel headers. No path filter.
* ``ptrace``: ``strace -f -e inject=SYSCALL:error=ERRNO:when=1+N [-P path]`` attached to every
  process of the container. ``when=1+N`` fails every N-th call (N = round(1/rate)): a
  deterministic rate. Slows the traced processes (every traced syscall stops them). A small
  supervisor on the node attaches a tracer to each new instance of the container in the same pod
  (a crash-looping database restarts its container, not its pod), so the fault outlives a
  container restart as a failing disk would.
* ``seccomp``: the container is restarted with a ``Localhost`` seccomp profile whose rule makes the
  syscalls return the errno (``SCMP_ACT_ERRNO``). Always, for every call: seccomp cannot look at
  paths (they are pointers) and has no randomness, so ``path`` and ``rate < 1`` are refused.

ptrace comes before seccomp: a tracer leaves nothing in the objects the agent reads (and a tracer
outside the container's PID namespace shows as ``TracerPid: 0`` inside it), while the profile sits
in the pod spec (``securityContext.seccompProfile``) and names the mechanism, which is a tell
unless the profile is itself the root cause. Force ``mechanism: seccomp`` only for such a problem.
The run record names the mechanism that ran.
"""

from __future__ import annotations

import errno as errnos
import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sregym.injectors import (HIDDEN_NAMESPACE, FaultError, Injector, Mechanism, MechanismUnavailable, NodeRunner,
                              PlannedState, Selector, TargetContainer, UserInputError, Verification, apply_edits,
                              container_index, container_processes, dig, edit, find_workload, get_object, injector,
                              install_file, kill_spawned, list_objects, live_container_id, namespace_of, node_runner,
                              pick_container, pids_with_cmdline, pods_of, poll, running_with, spawn)

EBPF = Mechanism("ebpf-override", "bcc kprobes with bpf_override_return on the syscalls",
                 ("kprobes", "bpf_override_return", "bcc_compile", "python3"))
SECCOMP = Mechanism("seccomp", "restart the container with a seccomp profile returning the errno", ("seccomp",))
PTRACE = Mechanism("ptrace", "strace syscall tampering attached to the container's processes", ("ptrace",))
WORK_DIR = f"/run/{HIDDEN_NAMESPACE}"


def syscall_names(v: list[str]) -> list[str]:
    """``v`` when every entry is a syscall's name (they go into a tracer's command line)."""
    bad = [s for s in v if not s.replace("_", "").isalnum()]
    if bad:
        raise ValueError(f"not syscall names: {bad}")
    return v


class SyscallFailureParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    syscalls: list[str] = Field(..., min_length=1, description="e.g. [openat, read, write, fsync]")
    errno: str = Field("EIO", description="errno name, e.g. EIO, ENOSPC, EACCES")
    rate: float = Field(1.0, gt=0, le=1, description="fraction of calls that fail")
    path: str | None = Field(None, description="only calls on this path (ptrace only)")

    @field_validator("errno")
    @classmethod
    def _known(cls, v: str) -> str:
        if not isinstance(getattr(errnos, v, None), int):
            raise ValueError(f"unknown errno {v!r}")
        return v

    @field_validator("syscalls")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        return syscall_names(v)


def strace_argv(params: SyscallFailureParams, pids: list[int], token: str) -> list[str]:
    """The strace command line of the ptrace mechanism (``token`` makes its output file unique)."""
    names = ",".join(params.syscalls)
    step = max(1, round(1 / params.rate))
    argv = ["strace", "-f", "-qq", "-o", f"{WORK_DIR}/{token}.trace", "-e", f"trace={names}",
            "-e", f"inject={names}:error={params.errno}:when=1+{step}" if step > 1 else
            f"inject={names}:error={params.errno}"]
    if params.path:
        argv += ["-P", params.path]
    for pid in pids:
        argv += ["-p", str(pid)]
    return argv


# Runs on the node for the ptrace mechanism: attaches strace to the processes of each container of
# one pod (cgroup paths name the pod uid and the container id) except the pause container and the
# pod's other containers, and again to each new container that replaces the target's (a restart).
# On SIGTERM its tracers are stopped, which detaches them cleanly.
TRACER_SUPERVISOR = r"""
import json, os, signal, subprocess, sys, time
uid, skip, base = sys.argv[1], set(filter(None, sys.argv[2].split(','))), json.loads(sys.argv[3])
marks = ('pod' + uid, 'pod' + uid.replace('-', '_'))
tracers = {}
def stop(*_):
    for t in tracers.values():
        t.terminate()
    for t in tracers.values():
        t.wait()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
def containers():
    out = {}
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            cg = open(f'/proc/{d}/cgroup').read()
            comm = open(f'/proc/{d}/comm').read().strip()
        except OSError:
            continue
        for line in cg.splitlines():
            path = line.split(':', 2)[-1]
            if any(m in path for m in marks):
                cid = path.rstrip('/').rsplit('/', 1)[-1].removesuffix('.scope').rsplit('-', 1)[-1]
                if cid and not cid.startswith('pod') and cid not in skip and comm != 'pause':
                    out.setdefault(cid, set()).add(int(d))
                break
    return out
while True:
    for cid, pids in containers().items():
        if cid not in tracers or tracers[cid].poll() is not None:
            argv = base + [a for p in sorted(pids) for a in ('-p', str(p))]
            tracers[cid] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    time.sleep(0.1)
"""


def seccomp_profile(params: SyscallFailureParams) -> dict:
    """The Localhost seccomp profile of the seccomp mechanism (OCI / Docker profile format)."""
    return {"defaultAction": "SCMP_ACT_ALLOW",
            "syscalls": [{"names": sorted(params.syscalls), "action": "SCMP_ACT_ERRNO",
                          "errnoRet": getattr(errnos, params.errno)}]}


def bcc_program(params: SyscallFailureParams, cgroup_id: int) -> str:
    """The eBPF (bcc C) program of the ebpf-override mechanism: fail the syscalls for tasks of one
    cgroup (v2 id), at the rate (``bpf_get_prandom_u32``)."""
    threshold = int(params.rate * 0xFFFFFFFF)
    fns = "\n".join(
        f"int syscall__{s}(struct pt_regs *ctx) {{ return fail(ctx); }}" for s in params.syscalls)
    return f"""#include <uapi/linux/ptrace.h>
static int fail(struct pt_regs *ctx) {{
    if (bpf_get_current_cgroup_id() != {cgroup_id}ULL) return 0;
    if (bpf_get_prandom_u32() > {threshold}U) return 0;
    bpf_override_return(ctx, -{getattr(errnos, params.errno)});
    return 0;
}}
{fns}
"""


def bcc_loader(params: SyscallFailureParams, cgroup_id: int) -> str:
    """Python (python3-bpfcc) that attaches ``bcc_program`` to each syscall and waits."""
    attach = "\n".join(f"b.attach_kprobe(event=b.get_syscall_fnname({s!r}), fn_name='syscall__{s}')"
                       for s in params.syscalls)
    return (f"import signal\nfrom bcc import BPF\nb = BPF(text={bcc_program(params, cgroup_id)!r})\n{attach}\n"
            "signal.pause()\n")


def crashed_since_start(pod: dict, container: str) -> bool:
    """Whether ``container`` of ``pod`` has exited with an error at least once (crash loop)."""
    for cs in pod.get("status", {}).get("containerStatuses") or []:
        if cs["name"] != container:
            continue
        for st in (cs.get("state") or {}, cs.get("lastState") or {}):
            if (st.get("terminated") or {}).get("exitCode", 0) != 0:
                return True
    return False


def kubelet_root(runner: NodeRunner) -> str:
    """The kubelet's --root-dir on the node (default /var/lib/kubelet), where Localhost seccomp
    profiles live under ``seccomp/``."""
    out = runner.run(["sh", "-c", "for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = kubelet ] && "
                      "tr '\\0' '\\n' < $p/cmdline; done"], check=False).stdout
    args = out.splitlines()
    for i, arg in enumerate(args):
        if arg.startswith("--root-dir="):
            return arg.split("=", 1)[1]
        if arg == "--root-dir" and i + 1 < len(args):
            return args[i + 1]
    return "/var/lib/kubelet"


class SyscallState(PlannedState):
    """ptrace and eBPF: the traced container and a token naming our processes; seccomp: the
    workload edit that applies a profile, the profile and the nodes it is installed on."""

    container: dict[str, Any] | str | None = Field(
        None, description="the target (``TargetContainer``); with seccomp, the container's name")
    token: str = Field("", description="names the tracer's or loader's processes")
    other_containers: list[str] = Field(default_factory=list, description="ids of the pod's other containers")
    edits: list[dict[str, Any]] = Field(default_factory=list, description="seccomp: the securityContext edit")
    profile: dict[str, Any] | None = Field(None, description="seccomp: the profile")
    profile_path: str = Field("", description="seccomp: its path under the kubelet's seccomp folder")
    nodes: list[str] = Field(default_factory=list, description="seccomp: nodes the profile is installed on")
    workload: list[str] = Field(default_factory=list, description="seccomp: [kind, namespace, name]")


@injector("syscall_failure")
class SyscallFailure(Injector[SyscallFailureParams]):
    """Make chosen syscalls of the target's processes fail with an errno (eBPF, seccomp or ptrace)."""

    Params = SyscallFailureParams
    State = SyscallState
    mechanisms = (EBPF, PTRACE, SECCOMP)  # hidden first: see the module docstring
    targets = ("Pod", "Deployment", "StatefulSet", "DaemonSet")
    node_level = True

    def dies_with_pod(self) -> bool:
        """A tracer or a cgroup filter acts on one pod's processes; a seccomp profile is in the
        workload's pod template, so every new pod starts under it already."""
        return self.mechanism.name != SECCOMP.name

    def dies_with_container(self) -> bool:
        """The tracer's processes and the eBPF filter's cgroup are the container's: a restarted
        container starts free of them."""
        return self.mechanism.name != SECCOMP.name

    def plan(self) -> SyscallState:
        p, m = self.params, self.mechanism.name
        if m == SECCOMP.name and (p.path or p.rate < 1):
            raise MechanismUnavailable("injector 'syscall_failure': seccomp cannot filter by path or fail a "
                                       "fraction of calls", hint="force mechanism: ptrace (or drop path/rate)")
        if m == EBPF.name and p.path:
            raise MechanismUnavailable("injector 'syscall_failure': the eBPF mechanism has no path filter",
                                       hint="force mechanism: ptrace")
        if m == SECCOMP.name:
            return self._plan_seccomp()
        tc = pick_container(self.ctx, self.target)
        token = "t" + hashlib.sha256(f"{tc.pod_uid}:{tc.container_id}:{m}".encode()).hexdigest()[:12]
        pod = get_object(self.ctx.kube, "Pod", tc.pod, tc.namespace) or {}
        others = sorted(s["containerID"].split("://", 1)[-1] for s in
                        (pod.get("status") or {}).get("containerStatuses") or []
                        if s["name"] != tc.container and s.get("containerID"))
        return SyscallState(container=tc.as_state(), token=token, other_containers=others)

    def tracer_argv(self, token: str) -> list[str]:
        """The strace command line the node's supervisor attaches to each container (its pids
        appended): the ptrace mechanism's; a primitive that tampers otherwise overrides it."""
        return strace_argv(self.params, [], token)

    # -- seccomp: a profile on every node and the container restarted with it ------------------
    def _plan_seccomp(self) -> SyscallState:
        ns = namespace_of(self.ctx, self.target)
        if self.target.kind == "Pod":
            raise UserInputError("target.kind: the seccomp mechanism restarts a workload's pods; "
                                 "name the Deployment/StatefulSet/DaemonSet")
        kind, obj = find_workload(self.ctx.kube, ns, self.target)
        i = container_index(obj, self.target.container)
        profile = seccomp_profile(self.params)
        rel = f"profiles/{hashlib.sha256(json.dumps(profile, sort_keys=True).encode()).hexdigest()[:12]}.json"
        path = ["spec", "template", "spec", "containers", i, "securityContext"]
        before = dig(obj, path)
        after = {**(before if isinstance(before, dict) and "$absent" not in before else {}),
                 "seccompProfile": {"type": "Localhost", "localhostProfile": rel}}
        nodes = sorted(n["metadata"]["name"] for n in list_objects(self.ctx.kube, "Node", None))
        return SyscallState(edits=[edit(kind, ns, obj["metadata"]["name"], path, before, after)], profile=profile,
                            profile_path=rel, nodes=nodes, workload=[kind, ns, obj["metadata"]["name"]],
                            container=obj["spec"]["template"]["spec"]["containers"][i]["name"])

    def _profile_file(self, runner: NodeRunner, rel: str) -> str:
        return f"{kubelet_root(runner)}/seccomp/{rel}"

    # -- lifecycle ---------------------------------------------------------------------------
    def inject(self, state: SyscallState) -> None:
        if self.mechanism.name == SECCOMP.name:
            for node in state.nodes:
                runner = node_runner(self.ctx, node)
                install_file(runner, runner.host_path(self._profile_file(runner, state.profile_path)),
                             json.dumps(state.profile))
            apply_edits(self.ctx.kube, state.edits)
            return
        tc = TargetContainer.from_state(state.container)
        runner = node_runner(self.ctx, tc.node)
        if pids_with_cmdline(runner, state.token):
            return  # already attached
        cid = live_container_id(self.ctx, tc)
        if not cid:
            raise FaultError(f"pod {tc.pod} container {tc.container} no longer runs")
        pids = [p.pid for p in container_processes(runner, cid)]
        if self.mechanism.name != EBPF.name:  # ptrace, or a subclass's tracer mechanism
            script = f"{WORK_DIR}/{state.token}.py"
            install_file(runner, script, TRACER_SUPERVISOR)
            spawn(runner, ["python3", script, tc.pod_uid, ",".join(state.other_containers),
                           json.dumps(self.tracer_argv(state.token))],
                  log=f"{WORK_DIR}/{state.token}.log")
            poll(lambda: self._traced(runner, state), 10, 0.2)
        else:
            # bpf_get_current_cgroup_id() is the id (inode) of the task's cgroup-v2 directory
            cgroup = runner.run(["sh", "-c", f"p=$(sed -n 's/^0:://p' /proc/{pids[0]}/cgroup); "
                                             "stat -c %i /sys/fs/cgroup/unified$p 2>/dev/null || "
                                             "stat -c %i /sys/fs/cgroup$p"]).stdout.strip()
            loader = f"{WORK_DIR}/{state.token}.py"
            install_file(runner, loader, bcc_loader(self.params, int(cgroup)))
            spawn(runner, ["python3", loader], log=f"{WORK_DIR}/{state.token}.log")

    def verify(self, state: SyscallState) -> Verification:
        if self.mechanism.name == SECCOMP.name:
            kind, ns, name = state.workload
            pods = pods_of(self.ctx.kube, find_workload(self.ctx.kube, ns, Selector(kind=kind, name=name))[1])
            want = state.edits[0]["after"]["seccompProfile"]
            hit = running_with(pods, state.container,
                               lambda c: (c.get("securityContext") or {}).get("seccompProfile") == want)
            filtered = []
            for pod in [p for p in pods if p["metadata"]["name"] in hit]:
                tc = TargetContainer(ns, pod["metadata"]["name"], pod["metadata"]["uid"], pod["spec"].get("nodeName", ""),
                                     state.container, next((s.get("containerID") for s in
                                                               pod["status"].get("containerStatuses") or []
                                                               if s["name"] == state.container), "") or "")
                if tc.container_id:
                    runner = node_runner(self.ctx, tc.node)
                    procs = container_processes(runner, tc.container_id)
                    status = runner.run(["grep", "^Seccomp:", f"/proc/{procs[0].pid}/status"], check=False).stdout \
                        if procs else ""
                    if status.split()[-1:] == ["2"]:
                        filtered.append(tc.pod)
                    elif not procs and crashed_since_start(pod, state.container):
                        # the failing calls kill it at startup (postgres cannot write its lock
                        # file): no process lives long enough to read, the crash loop is the effect
                        filtered.append(f"{tc.pod} (exits under it)")
            return Verification(bool(filtered), f"containers under the seccomp filter: {', '.join(filtered) or 'none'}")
        runner = node_runner(self.ctx, state.container["node"])
        attached = pids_with_cmdline(runner, state.token)
        if not attached:
            return Verification(False, "the tracer is not running")
        if self.mechanism.name == EBPF.name:
            return Verification(bool(attached), f"eBPF loader running (pid {attached[0][0]})")
        traced = self._traced(runner, state)
        return Verification(bool(traced), f"processes under syscall tampering: {traced}")

    def _traced(self, runner: NodeRunner, state: SyscallState) -> list[int]:
        """PIDs of the target container's live processes that one of this fault's tracers traces."""
        tracers = {str(pid) for pid, _ in pids_with_cmdline(runner, state.token)}
        cid = live_container_id(self.ctx, TargetContainer.from_state(state.container))
        procs = container_processes(runner, cid) if cid else []
        return [p.pid for p in procs
                if set(runner.run(["grep", "^TracerPid:", f"/proc/{p.pid}/status"], check=False).stdout.split()[-1:])
                & tracers]

    def recover(self, state: SyscallState) -> None:
        if self.mechanism.name == SECCOMP.name:
            apply_edits(self.ctx.kube, state.edits, undo=True)
            kind, ns, name = state.workload
            if kind == "StatefulSet":
                # a StatefulSet never replaces a pod that is not Ready with the restored spec
                # (its rolling update waits on it), so a crash-looping pod keeps the profile
                want = state.edits[0]["after"]["seccompProfile"]
                pods = pods_of(self.ctx.kube, find_workload(self.ctx.kube, ns, Selector(kind=kind, name=name))[1])
                for pod_name in running_with(pods, state.container, lambda c: (c.get("securityContext") or {})
                                             .get("seccompProfile") == want):
                    try:
                        self.ctx.kube.core.delete_namespaced_pod(pod_name, ns)
                    except Exception as e:  # noqa: BLE001 - already gone is fine
                        if getattr(e, "status", None) != 404:
                            raise
            for node in state.nodes:
                runner = node_runner(self.ctx, node)
                runner.run(["rm", "-f", runner.host_path(self._profile_file(runner, state.profile_path))],
                           check=False)
            return
        runner = node_runner(self.ctx, state.container["node"])
        # the supervisor first (else it would attach a new tracer), then any tracer it left
        found = pids_with_cmdline(runner, state.token)
        script = f"{WORK_DIR}/{state.token}.py"
        for pid, start in sorted(found, key=lambda p: script not in self._cmdline(runner, p[0])):
            kill_spawned(runner, pid, start)  # strace detaches cleanly on SIGTERM

    @staticmethod
    def _cmdline(runner: NodeRunner, pid: int) -> str:
        return runner.run(["cat", f"/proc/{pid}/cmdline"], check=False).stdout.replace("\0", " ")
