"""Host-side state of a local cluster: the pod bridge, routes, sysctls, an egress guard, and the
teardown of every mount, network namespace, iptables chain and cgroup the cluster left behind.

Everything created here is recorded in the cluster's data directory (``host-state.json``) so
that ``down`` removes exactly what ``up`` added, even after a crash.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from sregym.cluster.local.config import LocalNetwork
from sregym.cluster.local.paths import LocalPaths

EGRESS_CHAIN = "SREGYM-EGRESS"
# Chains only Kubernetes components and sregym create on this host.
CHAIN_PREFIXES = ("KUBE-", "SREGYM-")
# kube-router's NetworkPolicy sets (its chains are KUBE-ROUTER-*, KUBE-POD-FW-*, KUBE-NWPLCY-*)
IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-")
# portmap's chains: the top-level ones are shared with any other CNI user (podman...), the
# per-container CNI-DN-* ones are tagged with the network name in their jump's comment.
PORTMAP_PREFIXES = ("CNI-HOSTPORT-", "CNI-DN-")
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables")


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check)


def _state_file(paths: LocalPaths) -> Path:
    return paths.root / "host-state.json"


def _load_state(paths: LocalPaths) -> dict:
    try:
        return json.loads(_state_file(paths).read_text())
    except (OSError, ValueError):
        return {}


def _save_state(paths: LocalPaths, state: dict) -> None:
    _state_file(paths).write_text(json.dumps(state, indent=2))


def iptables_chains() -> set[tuple[str, str]]:
    """(table, chain) of every user-defined chain in the host's filter/nat/mangle tables."""
    chains = set()
    for table in ("filter", "nat", "mangle"):
        out = run("iptables-save", "-t", table, check=False).stdout
        chains |= {(table, m.group(1)) for m in re.finditer(r"^:(\S+) -", out, re.M)}
    return chains


def links() -> list[dict]:
    return json.loads(run("ip", "-j", "link", "show").stdout or "[]")


def netns_names() -> list[str]:
    return sorted(p.name for p in Path("/run/netns").glob("*")) if Path("/run/netns").is_dir() else []


def mounts_under(prefixes: list[str]) -> list[str]:
    """Mount points below any of ``prefixes``, deepest first (the order to unmount them)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == p or point.startswith(p.rstrip("/") + "/") for p in prefixes):
            found.append(point)
    return sorted(set(found), key=lambda p: p.count("/"), reverse=True)


def setup(paths: LocalPaths, net: LocalNetwork) -> None:
    """Create the bridge with the node IP, a route for service IPs, sysctls, and the egress guard."""
    state = _load_state(paths)
    if "chains_before" not in state:
        state["chains_before"] = sorted(map(list, iptables_chains()))
    if "sysctls_before" not in state:
        state["sysctls_before"] = {k: Path("/proc/sys", k).read_text().strip() for k in SYSCTLS
                                   if Path("/proc/sys", k).exists()}
    _save_state(paths, state)

    if not any(link.get("ifname") == net.bridge for link in links()):
        run("ip", "link", "add", net.bridge, "type", "bridge")
    prefix = net.node_pod_cidr.split("/")[1]
    run("ip", "addr", "replace", f"{net.node_ip}/{prefix}", "dev", net.bridge)
    run("ip", "link", "set", net.bridge, "up")
    # Service IPs are DNATed by kube-proxy; any that are not must stay on this host, not follow
    # the default route out of it.
    run("ip", "route", "replace", net.service_cidr, "dev", net.bridge)
    for key in SYSCTLS:
        if Path("/proc/sys", key).exists():
            Path("/proc/sys", key).write_text("1")
    # Pods may talk to each other, to the node and to service IPs, never to other hosts.
    if run("iptables", "-n", "-L", EGRESS_CHAIN, check=False).returncode != 0:
        run("iptables", "-N", EGRESS_CHAIN)
        run("iptables", "-A", EGRESS_CHAIN, "-d", net.pod_cidr, "-j", "RETURN")
        run("iptables", "-A", EGRESS_CHAIN, "-j", "REJECT", "--reject-with", "icmp-net-unreachable")
    if run("iptables", "-C", "FORWARD", "-s", net.pod_cidr, "-j", EGRESS_CHAIN, check=False).returncode != 0:
        run("iptables", "-I", "FORWARD", "1", "-s", net.pod_cidr, "-j", EGRESS_CHAIN)


def remove_pod_netns(net: LocalNetwork) -> list[str]:
    """Delete network namespaces whose eth0 is a veth plugged into our bridge (left by a crash)."""
    ours = {link["ifindex"] for link in links() if link.get("master") == net.bridge}
    removed = []
    for ns in netns_names():
        if not ns.startswith("cni-"):
            continue
        out = run("ip", "-n", ns, "-j", "link", "show", "eth0", check=False).stdout
        try:
            peer = json.loads(out)[0].get("link_index")
        except (ValueError, IndexError):
            continue
        if peer in ours:
            run("ip", "netns", "delete", ns, check=False)
            removed.append(ns)
    return removed


def teardown(paths: LocalPaths, net: LocalNetwork) -> list[str]:
    """Undo ``setup`` and remove leftovers; return a list of what was removed."""
    done: list[str] = []
    state = _load_state(paths)
    done += [f"netns {n}" for n in remove_pod_netns(net)]
    for point in mounts_under([str(paths.root), "/run/netns/cni-"]):
        if point.startswith("/run/netns/") and Path(point).name not in netns_names():
            continue
        if run("umount", point, check=False).returncode != 0:
            run("umount", "-l", point, check=False)
        done.append(f"mount {point}")
    for ns_file in paths.containerd_state.glob("io.containerd.grpc.v1.cri/netns/*"):
        ns_file.unlink(missing_ok=True)  # the (now unmounted) mount points of pod netns

    if run("iptables", "-C", "FORWARD", "-s", net.pod_cidr, "-j", EGRESS_CHAIN, check=False).returncode == 0:
        run("iptables", "-D", "FORWARD", "-s", net.pod_cidr, "-j", EGRESS_CHAIN, check=False)
    before = {tuple(c) for c in state.get("chains_before", [])}
    for table, chain in our_chains(paths, before):
        if run("iptables", "-t", table, "-X", chain, check=False).returncode == 0:
            done.append(f"iptables {table}/{chain}")
    done += remove_policy_ipsets()

    for link in links():
        if link.get("master") == net.bridge:
            run("ip", "link", "delete", link["ifname"], check=False)
            done.append(f"veth {link['ifname']}")
    run("ip", "route", "delete", net.service_cidr, "dev", net.bridge, check=False)
    if any(link.get("ifname") == net.bridge for link in links()):
        run("ip", "link", "delete", net.bridge, check=False)
        done.append(f"bridge {net.bridge}")
    for key, value in state.get("sysctls_before", {}).items():
        try:
            Path("/proc/sys", key).write_text(value)
        except OSError:
            pass
    done += remove_cni_cache(paths)
    done += remove_cgroups()
    _state_file(paths).unlink(missing_ok=True)
    return done


def our_chains(paths: LocalPaths, before: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """Flush (and drop every jump to) the chains this cluster created; return them for deletion.

    Never touches a chain that existed before ``up`` or that another tool owns."""
    network = f'"sregym-{paths.name}"'
    new = iptables_chains() - before
    ours = [c for c in new if c[1].startswith(CHAIN_PREFIXES)]
    nat = run("iptables-save", "-t", "nat", check=False).stdout.splitlines()
    for table, chain in new:
        if chain.startswith("CNI-DN-"):
            jumps = [r for r in nat if re.search(rf"-j {re.escape(chain)}(\s|$)", r)]
            if not jumps or any(network in r for r in jumps):
                ours.append((table, chain))
    for table, chain in ours:
        _drop_jumps_to(table, chain)
    for table, chain in ours:
        run("iptables", "-t", table, "-F", chain, check=False)
    # Shared portmap chains: ours only if we created them and nothing else uses them now.
    for table, chain in sorted(new):
        if chain.startswith("CNI-HOSTPORT-") and not _rules_in(table, chain):
            _drop_jumps_to(table, chain)
            ours.append((table, chain))
    return ours


def _rules_in(table: str, chain: str) -> list[str]:
    out = run("iptables-save", "-t", table, check=False).stdout.splitlines()
    return [r for r in out if r.startswith(f"-A {chain} ")]


def _drop_jumps_to(table: str, chain: str) -> None:
    rules = run("iptables-save", "-t", table, check=False).stdout.splitlines()
    for rule in rules:
        if rule.startswith("-A ") and re.search(rf"-j {re.escape(chain)}(\s|$)", rule):
            run("iptables", "-t", table, *shlex.split(rule.replace("-A ", "-D ", 1)), check=False)


def remove_policy_ipsets() -> list[str]:
    """Destroy the ipsets kube-router's firewall made for NetworkPolicies (once no rule uses them)."""
    if shutil.which("ipset") is None:
        return []
    names = run("ipset", "list", "-n", check=False).stdout.split()
    done = []
    for name in names:
        if name.startswith(IPSET_PREFIXES) and run("ipset", "destroy", name, check=False).returncode == 0:
            done.append(f"ipset {name}")
    return done


def remove_cni_cache(paths: LocalPaths, cache: Path = Path("/var/lib/cni/results")) -> list[str]:
    """Drop libcni's cached results for our network's sandboxes (and their loopback entries)."""
    prefix = f"sregym-{paths.name}-"
    ids = set()
    removed = []
    for f in cache.glob(f"{prefix}*"):
        ids.add(f.name[len(prefix):].rsplit("-", 1)[0])
        f.unlink(missing_ok=True)
        removed.append(f"cni cache {f.name}")
    for sandbox in ids:
        for f in cache.glob(f"cni-loopback-{sandbox}-*"):
            f.unlink(missing_ok=True)
    return removed


def remove_cgroups() -> list[str]:
    """Remove the kubelet's (now empty) ``kubepods`` cgroups from every v1 hierarchy."""
    removed = []
    for controller in Path("/sys/fs/cgroup").iterdir():
        top = controller / "kubepods"
        if not top.is_dir():
            continue
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            top.rmdir()
            removed.append(f"cgroup {top}")
        except OSError:
            pass
    return removed
