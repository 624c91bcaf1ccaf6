"""Which fault mechanisms a node supports, probed on the node itself and cached per run.

The probe (``nodeprobe.py``, standard library only) runs where the faults will run: on this host
for the ``local`` provider, else in the privileged node pod of the hidden namespace. Results are
kept per node for the life of a ``CapabilityCache`` (one per run) and optionally in a JSON file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from sregym.cluster import nodeprobe
from sregym.cluster.kube import Kube
from sregym.cluster.nodeagent import NodeRunner, runner_for
from sregym.core.errors import ClusterError

# Every capability name the probe reports, with what it enables (shown by `sregym doctor`).
CAPABILITIES: dict[str, str] = {
    "kprobes": "kernel probes (needed by eBPF return override)",
    "bpf_override_return": "eBPF bpf_override_return: make a kernel function return an error",
    "bcc_compile": "kernel headers present so bcc can compile eBPF programs",
    "btf": "BTF at /sys/kernel/btf/vmlinux: libbpf CO-RE programs, BPF tracepoints",
    "device_mapper": "device-mapper driver (dmsetup)",
    "dm_dust": "dm-dust target: bad sectors on a block device",
    "dm_flakey": "dm-flakey target: intermittently failing block device",
    "netem": "netem qdisc: latency, jitter, loss, reordering",
    "tbf": "tbf qdisc: bandwidth limit (and queueing delay)",
    "iptables_statistic": "iptables statistic match: random packet loss",
    "iptables_string": "iptables string match: drop DNS queries for one name",
    "nfqueue": "iptables NFQUEUE: hand packets to a user-space process (delay)",
    "fuse": "/dev/fuse: user-space file systems",
    "loop": "loop devices",
    "seccomp": "seccomp filters (SCMP_ACT_ERRNO) and runc with libseccomp",
    "ptrace": "strace with syscall tampering (-e inject)",
    "stress_ng": "stress-ng load generator",
    "cgroup_v1": "cgroup v1 controllers",
    "cgroup_v2": "cgroup v2 hierarchy",
    "iptables": "iptables in a pod network namespace (partition, DNS drop)",
    "nsenter": "nsenter into a container's namespaces",
    "python3": "python3 on the node (helpers)",
    "network_policy_firewall": "a NetworkPolicy firewall runs on the node's host (kube-router's chains)",
    "network_policy_enforcement": "NetworkPolicy is enforced: an enforcing plugin's DaemonSet in the API, or a "
                                  "host firewall on the node",
}

# DaemonSets of network plugins that enforce NetworkPolicy (the bridge/flannel plugins do not).
ENFORCING_CNI = ("calico-node", "cilium", "kube-router", "antrea-agent", "weave-net", "canal",
                 "kube-network-policies", "cilium-agent")


def network_policy_enforcement(kube: Kube) -> tuple[bool, str]:
    """Whether a NetworkPolicy would change anything: an enforcing plugin's DaemonSet is present."""
    try:
        sets = kube.apps.list_daemon_set_for_all_namespaces().items
    except Exception as e:  # noqa: BLE001 - no answer means we cannot claim enforcement
        return False, f"cannot list DaemonSets: {e}"
    found = sorted({d.metadata.name for d in sets if any(d.metadata.name.startswith(n) for n in ENFORCING_CNI)})
    return bool(found), (f"enforcing plugin: {', '.join(found)}" if found else
                         "no NetworkPolicy-enforcing network plugin found (e.g. the bridge plugin)")


@dataclass(frozen=True)
class NodeCapabilities:
    """Probe result of one node: capability -> present?, with a human detail per capability."""

    node: str
    present: dict[str, bool]
    details: dict[str, str]

    @classmethod
    def from_probe(cls, node: str, raw: dict[str, dict]) -> NodeCapabilities:
        return cls(node, {k: bool(v.get("ok")) for k, v in raw.items()},
                   {k: str(v.get("detail", "")) for k, v in raw.items()})

    def to_json(self) -> dict:
        return {k: {"ok": self.present[k], "detail": self.details.get(k, "")} for k in self.present}


def probe_source() -> str:
    """The probe's source text, shipped to the node over stdin."""
    return Path(nodeprobe.__file__).read_text()


def probe_with(runner: NodeRunner) -> NodeCapabilities:
    """Run the probe with ``runner`` (on the host, or in the node pod) and parse its JSON."""
    proc = runner.run(["python3", "-"], input=probe_source(), timeout=120)
    try:
        raw = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise ClusterError(f"the capability probe on node {runner.node} printed no JSON: "
                           f"{(proc.stderr or proc.stdout)[-500:]}") from None
    return NodeCapabilities.from_probe(runner.node, raw)


@dataclass
class CapabilityCache:
    """Probes each node once per run; ``cache_file`` (optional) keeps results across processes
    of the same run (e.g. the conductor and ``sregym cleanup``)."""

    kube: Kube
    hidden_namespace: str
    cache_file: Path | None = None
    _nodes: dict[str, NodeCapabilities] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cache_file and self.cache_file.is_file():
            for node, raw in json.loads(self.cache_file.read_text()).items():
                self._nodes[node] = NodeCapabilities.from_probe(node, raw)

    def get(self, node: str) -> NodeCapabilities:
        if node not in self._nodes:
            caps = probe_with(runner_for(self.kube, node, self.hidden_namespace))
            ok, detail = network_policy_enforcement(self.kube)
            if not ok and caps.present.get("network_policy_firewall"):
                ok, detail = True, "kube-router's firewall on the node (host process)"
            caps.present["network_policy_enforcement"], caps.details["network_policy_enforcement"] = ok, detail
            self._nodes[node] = caps
            if self.cache_file:
                self.cache_file.parent.mkdir(parents=True, exist_ok=True)
                self.cache_file.write_text(json.dumps({n: c.to_json() for n, c in self._nodes.items()}, indent=1))
        return self._nodes[node]

    def __call__(self, node: str) -> dict[str, bool]:
        """The ``FaultContext.node_capabilities`` callable: capability -> present."""
        return dict(self.get(node).present)
