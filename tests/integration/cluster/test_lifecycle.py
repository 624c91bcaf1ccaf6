"""`down` leaves nothing behind; `up` recovers after every daemon is SIGKILLed.

These tests stop and restart the session's cluster, so conftest runs them before any other
integration test."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sregym.cluster.local import hostnet, processes
from sregym.cluster.local.provider import COMPONENTS, LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.lifecycle]


def host_listing(local: LocalCluster) -> dict[str, list]:
    """Everything a cluster could leave behind on this host."""
    links = hostnet.links()
    return {
        "mounts": hostnet.mounts_under([str(local.paths.root), "/run/netns/cni-"]),
        "netns": [n for n in hostnet.netns_names() if n.startswith("cni-")]
                 + [str(p) for p in local.paths.containerd_state.glob("io.containerd.grpc.v1.cri/netns/*")],
        "cni_cache": [p.name for p in Path("/var/lib/cni/results").glob(f"sregym-{local.name}-*")],
        "bridge": [l["ifname"] for l in links if l["ifname"] == local.net.bridge],
        "veths": [l["ifname"] for l in links if l.get("master") == local.net.bridge
                  or (l.get("link_type") == "ether" and l["ifname"].startswith("veth"))],
        "iptables": sorted(f"{t}/{c}" for t, c in hostnet.iptables_chains()
                           if c.startswith(hostnet.CHAIN_PREFIXES + hostnet.PORTMAP_PREFIXES)),
        "ipsets": [n for n in subprocess.run(["ipset", "list", "-n"], capture_output=True, text=True).stdout.split()
                   if n.startswith(hostnet.IPSET_PREFIXES)],
        "processes": sorted(c for c in COMPONENTS if processes.running_pid(local.paths, c)),
        "shims": processes.pids_with_arg("containerd-shim-runc-v2", str(local.paths.containerd_socket)),
        "routes": [r for r in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout.splitlines()
                   if local.net.bridge in r],
    }


@pytest.fixture
def local(cluster) -> LocalCluster:
    if cluster.provider != "local":
        pytest.skip("local provider only")
    return LocalCluster(cluster.name)


def _assert_healthy(local: LocalCluster) -> None:
    assert local.is_up()
    assert local.status()["coredns"] == "Ready"


def test_down_leaves_nothing_behind_and_up_restores_the_cluster(local):
    _assert_healthy(local)
    local.down()
    after_first_down = host_listing(local)
    # Nothing of ours is left (portmap's shared CNI-HOSTPORT-* chains may belong to other CNI users).
    ours = dict(after_first_down, iptables=[c for c in after_first_down["iptables"]
                                             if c.split("/")[1].startswith(hostnet.CHAIN_PREFIXES)])
    assert ours == {k: [] for k in ours}, after_first_down

    local.up()
    _assert_healthy(local)
    during = host_listing(local)
    assert during["bridge"] and during["processes"] == sorted(COMPONENTS) and during["iptables"]
    assert "filter/KUBE-ROUTER-FORWARD" in during["iptables"]  # the NetworkPolicy firewall is in place

    local.down()
    assert host_listing(local) == after_first_down
    local.up()
    _assert_healthy(local)


def test_up_recovers_after_every_daemon_is_killed_with_sigkill(local):
    _assert_healthy(local)
    pods_before = local.handle().kube.core.list_namespaced_pod("kube-system").items
    for name in COMPONENTS:
        pid = processes.running_pid(local.paths, name)
        os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert not any(processes.running_pid(local.paths, c) for c in COMPONENTS)
    started = time.monotonic()
    local.up()
    _assert_healthy(local)
    assert time.monotonic() - started < 120
    # The same pods carry on (containerd's shims outlive a containerd crash): no data was lost.
    pods_after = local.handle().kube.core.list_namespaced_pod("kube-system").items
    assert {p.metadata.uid for p in pods_before} <= {p.metadata.uid for p in pods_after} | set()
    assert re.match(r"v1\.35\.", local.handle().kube.server_version())
