"""Benchmark the local cluster: cold build time, `up` to node Ready with cached binaries, and the
resident memory of the idle control plane + node.

    sudo python3 benchmarks/cluster_up.py            # uses the recorded cold build times
    sudo python3 benchmarks/cluster_up.py --cold     # rebuilds everything into a scratch cache

Targets (issue 2): up to Ready under 60 s on 2 cores (every run); idle memory under 2 GiB RSS in
all. The last line is the verdict; the exit code is 1 when a target is missed.
Stops and restarts the cluster named by --name (default: default).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

UP_TARGET_S = 60.0
IDLE_TARGET_MIB = 2048


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pids: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo += children.get(pid, [])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="default")
    parser.add_argument("--cold", action="store_true", help="rebuild every Go component into a scratch cache")
    parser.add_argument("--repeat", type=int, default=3, help="how many down/up cycles to time")
    args = parser.parse_args()

    from sregym.cluster import binaries
    from sregym.cluster.local import processes
    from sregym.cluster.local.provider import LocalCluster

    print(f"machine: {os.cpu_count()} CPUs, Kubernetes {binaries.KUBERNETES_VERSION}")
    if args.cold:
        with tempfile.TemporaryDirectory() as scratch:
            os.environ["SREGYM_CACHE"] = scratch
            for c in binaries.COMPONENTS:
                t = time.monotonic()
                binaries.build(c, log=lambda s: None)
                print(f"cold build {c.name:<11} {time.monotonic() - t:7.0f} s")
            del os.environ["SREGYM_CACHE"]
    else:
        total = 0.0
        for c in binaries.COMPONENTS:
            sec = binaries.recorded_build_seconds(c)
            total += sec or 0
            print(f"cold build {c.name:<11} {sec if sec is not None else float('nan'):7.0f} s (recorded when built)")
        print(f"cold build total      {total:7.0f} s")

    local = LocalCluster(args.name)
    times = []
    for _ in range(args.repeat):
        local.down()
        t = time.monotonic()
        local.up()
        times.append(time.monotonic() - t)
    print(f"up -> node Ready + CoreDNS Ready (cached binaries): median {statistics.median(times):.1f} s, "
          f"max {max(times):.1f} s over {len(times)} runs (target < 60 s)")

    time.sleep(20)  # let the fresh control plane settle to its idle state
    shims = set(processes.pids_with_arg("containerd-shim-runc-v2", str(local.paths.containerd_socket)))
    print("idle RSS by daemon:")
    daemon_kib = 0
    for name, pid in sorted(local.daemon_pids().items()):
        daemon_kib += rss_kib(pid)
        print(f"  {name:<24} {rss_kib(pid) / 1024:7.0f} MiB")
    pods = local.handle().kube.core.list_pod_for_all_namespaces().items
    system = [p for p in pods if p.metadata.namespace == "kube-system"]
    shim_tree = descendants(shims)
    pod_kib = sum(rss_kib(p) for p in shim_tree)
    print(f"control plane + node daemons: {daemon_kib / 1024:.0f} MiB RSS (target for the idle cluster < 2048 MiB)")
    print(f"all pod sandboxes and containers: {pod_kib / 1024:.0f} MiB RSS in {len(shim_tree)} processes, "
          f"{len(pods)} pods ({len(system)} in kube-system); an idle cluster runs only CoreDNS")
    misses = [f"up took {max(times):.1f} s (target < 60 s)"] if max(times) >= UP_TARGET_S else []
    if daemon_kib / 1024 >= IDLE_TARGET_MIB:
        misses.append(f"daemons {daemon_kib / 1024:.0f} MiB RSS (target < {IDLE_TARGET_MIB} MiB)")
    if len(pods) == len(system):
        print(f"idle total: {(daemon_kib + pod_kib) / 1024:.0f} MiB RSS (target < 2048 MiB)")
        if (daemon_kib + pod_kib) / 1024 >= IDLE_TARGET_MIB:
            misses.append(f"idle total {(daemon_kib + pod_kib) / 1024:.0f} MiB RSS (target < {IDLE_TARGET_MIB} MiB)")
    print(f"verdict: {'MISSES ' + '; '.join(misses) if misses else 'meets every target'}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
