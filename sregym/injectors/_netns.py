"""Base of network faults applied inside the target pod's network namespace (iptables, tc).

Rules live in one chain of our own, hooked into OUTPUT and/or INPUT, so recover removes exactly
what inject added: unhook, flush, delete. The namespace belongs to the pod's sandbox, not to the
container: a container that restarted (crash, kill) is back in the same namespace with the rules
still there, so commands enter through any live process of that namespace (found by its inode),
not only the process planned. If the pod is gone its network namespace (and every rule in it) is
gone too, so recover has nothing to do. The chain's name is neutral.
"""

from __future__ import annotations

import hashlib
import shlex
from typing import Any, ClassVar

from pydantic import Field

from sregym.cluster.nodeagent import NodeRunner, process_starttime
from sregym.core.errors import FaultError
from sregym.injectors._api import Injector, P, PlannedState, Verification
from sregym.injectors._node import TargetContainer, node_runner, pick_container, target_pid


def chain_name(token: str) -> str:
    return "POD-" + hashlib.sha256(token.encode()).hexdigest()[:10].upper()


# A lossy link or an unreachable server never touches a pod's processes talking to each other (a
# sidecar on 127.0.0.1, the pod's own IP, which the kernel routes over lo too). From OUTPUT the
# in-interface is empty and from INPUT the out-interface, so the pair holds in either hook.
NOT_LOOPBACK = "! -i lo ! -o lo"


def random_drop_rules(probability: float, peer_cidr: str | None = None) -> list[str]:
    """Rules that drop ``probability`` of the pod's packets (to and from ``peer_cidr`` only, if
    given), none of them on the loopback."""
    match = f"{NOT_LOOPBACK} -m statistic --mode random --probability {probability} -j DROP"
    if not peer_cidr:
        return [match]
    return [f"-d {peer_cidr} {match}", f"-s {peer_cidr} {match}"]


def chain_script(chain: str, hooks: list[str], rules: list[str]) -> str:
    """Shell that (re)creates ``chain`` with ``rules`` and hooks it into ``hooks`` once."""
    lines = [f"iptables -w -N {chain} 2>/dev/null || true", f"iptables -w -F {chain}"]
    lines += [f"iptables -w -A {chain} {rule}" for rule in rules]
    lines += [f"iptables -w -C {h} -j {chain} 2>/dev/null || iptables -w -I {h} 1 -j {chain}" for h in hooks]
    return " && ".join(lines)


def unchain_script(chain: str, hooks: list[str]) -> str:
    """Shell that removes ``chain`` and its hooks; harmless if they do not exist."""
    lines = [f"while iptables -w -D {h} -j {chain} 2>/dev/null; do :; done" for h in hooks]
    lines += [f"iptables -w -F {chain} 2>/dev/null", f"iptables -w -X {chain} 2>/dev/null", "true"]
    return "; ".join(lines)


# the pod's interface: the one its default route leaves by (eth0 under most CNI plugins)
DEFAULT_DEV = "$(ip route show default | awk '{print $5; exit}')"


def tbf_script(rate: str, burst: str, latency: str) -> str:
    return f"tc qdisc replace dev {DEFAULT_DEV} root tbf rate {rate} burst {burst} latency {latency}"


def root_qdisc_script() -> str:
    return f"tc -s qdisc show dev {DEFAULT_DEV} root"


def clear_root_script() -> str:
    """Back to the interface's default qdisc (what a pod's veth had before)."""
    return f"tc qdisc del dev {DEFAULT_DEV} root 2>/dev/null; true"


def netns_id(runner: NodeRunner, pid: int) -> str:
    """The network namespace of ``pid`` as ``net:[inode]`` ('' if unreadable)."""
    proc = runner.run(["readlink", f"/proc/{pid}/ns/net"], check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def pid_in_netns(runner: NodeRunner, netns: str) -> int | None:
    """A live process in the network namespace ``netns`` (``net:[inode]``), or None."""
    script = ('for p in /proc/[0-9]*; do [ "$(readlink $p/ns/net 2>/dev/null)" = "$1" ] '
              '&& { echo "${p#/proc/}"; exit 0; }; done; exit 1')
    proc = runner.run(["sh", "-c", script, "sh", netns], check=False)
    out = proc.stdout.strip()
    return int(out) if proc.returncode == 0 and out.isdigit() else None


class NetnsState(PlannedState):
    """The planned state of a :class:`PodNetworkFault`: the target container, a process in its pod's
    network namespace, our chain and the rules it holds."""

    container: dict[str, Any] = Field(default_factory=dict, description="the target (``TargetContainer``)")
    pid: int | None = Field(None, description="a process in the pod's network namespace, on its node")
    pid_start: str | None = Field(None, description="that process's start time (a reused pid is not it)")
    netns: str | None = Field(None, description="the network namespace's id, to find another process in it")
    chain: str = Field("", description="our iptables chain")
    hooks: list[str] = Field(default_factory=list, description="built-in chains that jump to ours")
    rules: list[str] = Field(default_factory=list, description="iptables rules of our chain")


class PodNetworkFault(Injector[P]):
    """Plans the target container (seeded) and runs commands in its pod's network namespace."""

    targets = ("Pod", "Deployment", "StatefulSet", "DaemonSet")
    node_level = True
    pod_scoped = True  # its network namespace goes with the pod's sandbox
    State: ClassVar[type[NetnsState]] = NetnsState

    def plan_target(self, **more: Any) -> Any:
        """The planned target as ``State``, with ``more`` of its fields."""
        tc = pick_container(self.ctx, self.target)
        runner, pid = target_pid(self.ctx, tc)
        return self.State(container=tc.as_state(), pid=pid, pid_start=process_starttime(runner, pid),
                          netns=netns_id(runner, pid), chain=chain_name(f"{tc.pod_uid}:{self.name}"), **more)

    def in_netns(self, state: NetnsState, script: str, check: bool = True) -> str | None:
        """Run ``script`` (sh) in the pod's network namespace; None if no process is left in it."""
        runner = self.runner(state)
        pid: int | None = state.pid
        if process_starttime(runner, state.pid) != state.pid_start:
            # the planned process is gone; the namespace lives as long as the pod's sandbox
            pid = pid_in_netns(runner, state.netns) if state.netns else None
            if pid is None:
                if check:
                    raise FaultError(f"pod {state.container['pod']} restarted since the plan")
                return None
        proc = runner.run(["nsenter", "-t", str(pid), "-n", "--", "sh", "-c", script], check=check)
        return proc.stdout

    def runner(self, state: NetnsState) -> NodeRunner:
        return node_runner(self.ctx, TargetContainer.from_state(state.container).node)

    def chain_counters(self, state: NetnsState) -> int:
        """Packets matched by the rules of our chain (what verify observes)."""
        out = self.in_netns(state, f"iptables -w -L {state.chain} -v -n -x", check=False) or ""
        total = 0
        for line in out.splitlines()[2:]:
            parts = line.split()
            if parts and parts[0].isdigit():
                total += int(parts[0])
        return total

    def probe_traffic(self, state: NetnsState, host: str, port: int, tries: int = 5) -> None:
        """Send a few TCP connects from inside the pod's netns so the rules see packets."""
        py = ("import socket,sys\nfor _ in range(int(sys.argv[3])):\n s=socket.socket();s.settimeout(1)\n"
              " try: s.connect((sys.argv[1],int(sys.argv[2])))\n except OSError: pass\n s.close()")
        self.in_netns(state, f"python3 -c {shlex.quote(py)} {shlex.quote(host)} {port} {tries}", check=False)

    def counted(self, state: NetnsState, detail: str) -> Verification:
        n = self.chain_counters(state)
        return Verification(n > 0, f"{detail}: {n} packets matched in the pod's network namespace")
