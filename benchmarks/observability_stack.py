"""Time to deploy the observability stack, and its steady memory per container (from cAdvisor via
its own Prometheus). Usage: python benchmarks/observability_stack.py [--settle SECONDS]

Target: every pod on the cluster (the stack, and both apps when deployed) under 6 GiB RSS. The last
line is the verdict; the exit code is 1 when the target is missed or the memory cannot be read."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
import urllib.request

from sregym.apps import observability
from sregym.cluster.images import build_images
from sregym.cluster.providers import current_cluster

ALL_PODS_TARGET_MIB = 6144

def query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=20) as response:
        return json.load(response)["data"]["result"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--settle", type=float, default=120, help="seconds to let the stack settle before measuring")
    args = parser.parse_args()
    cluster = current_cluster()
    started = time.monotonic()
    socket = cluster.data_dir / "containerd" / "containerd.sock" if cluster.data_dir else None
    images = build_images(list(observability.IMAGES.values()), provider=cluster.provider, cluster=cluster.name,
                          socket=socket)
    print(f"images (build or reuse, load): {time.monotonic() - started:.1f}s "
          f"({', '.join(f'{i.name}={i.status}' for i in images)})")
    started = time.monotonic()
    installed = observability.deploy_observability(cluster)
    print(f"deploy to ready: {time.monotonic() - started:.1f}s ({'installed' if installed else 'reused'})")
    time.sleep(args.settle)
    base = observability.prometheus_url(cluster)
    ns = "observability"
    # the pod-level cgroup (container="") holds all its containers: no double counting
    rows = query(base, f'sum by (pod) (container_memory_rss{{namespace="{ns}",pod!="",container=""}})')
    total = 0.0
    for row in sorted(rows, key=lambda r: (r["metric"].get("pod", ""), r["metric"].get("container", ""))):
        mib = float(row["value"][1]) / 2**20
        total += mib
        print(f"  {row['metric'].get('pod', '?'):45s} {mib:8.1f} MiB RSS")
    print(f"observability stack steady RSS: {total:.0f} MiB")
    everything = query(base, 'sum(container_memory_rss{pod!="",container=""})')
    misses = [] if rows else ["no memory figures for the stack from Prometheus"]
    if everything:
        all_mib = float(everything[0]["value"][1]) / 2**20
        print(f"all pods on the cluster: {all_mib:.0f} MiB RSS (target with both apps: < {ALL_PODS_TARGET_MIB})")
        if all_mib >= ALL_PODS_TARGET_MIB:
            misses.append(f"all pods {all_mib:.0f} MiB RSS (target < {ALL_PODS_TARGET_MIB} MiB)")
    else:
        misses.append("no memory figure for all pods from Prometheus")
    print(f"verdict: {'MISSES ' + '; '.join(misses) if misses else 'meets every target'}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
