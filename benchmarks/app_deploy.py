"""Time to Ready of each app (cold: from an empty namespace and empty stores; reused: a second
deploy at the same chart hash), then the steady memory of each app and of the observability stack.

    python benchmarks/app_deploy.py [--app hotel-reservation --app online-shop] [--settle 60] [--json]

Needs a running cluster (the last `sregym cluster up`, or --kubeconfig/--context) with the images
loaded (`sregym images build`). The observability stack is deployed (or reused) first.

Target: both apps and the stack within 6 GiB of memory on one node, and a second deploy at the same
chart hash reuses the release. The last line is the verdict; the exit code is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sregym.apps import delete, deploy, load_app
from sregym.apps import observability
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.providers import current_cluster
from sregym.core.constants import OBSERVABILITY_NAMESPACE

MEMORY_TARGET_BYTES = 6 * 2**30


def memory_by_namespace(cluster: ClusterHandle) -> dict[str, int]:
    """Working-set bytes of every pod, summed per namespace, from each kubelet's summary API."""
    totals: dict[str, int] = {}
    for node in cluster.kube.core.list_node().items:
        raw = cluster.kube.kubectl("get", "--raw", f"/api/v1/nodes/{node.metadata.name}/proxy/stats/summary").stdout
        for pod in json.loads(raw).get("pods", []):
            ns = pod["podRef"]["namespace"]
            totals[ns] = totals.get(ns, 0) + int((pod.get("memory") or {}).get("workingSetBytes") or 0)
    return totals


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", action="append", help="app to measure (repeatable; default: both of ours)")
    parser.add_argument("--settle", type=float, default=60, help="seconds under load before memory is read")
    parser.add_argument("--kubeconfig", type=Path)
    parser.add_argument("--context")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    apps = args.app or ["hotel-reservation", "online-shop"]
    cluster = current_cluster(args.kubeconfig, args.context)

    observability.deploy_observability(cluster, timeout=600)
    results: dict[str, dict] = {}
    for name in apps:
        delete(cluster, name, purge_data=True)
        cold = deploy(cluster, name, timeout=900)
        reused = deploy(cluster, name)
        results[name] = {"namespace": cold.namespace, "cold_ready_s": round(cold.seconds, 1),
                         "reused_ready_s": round(reused.seconds, 1), "reused": reused.reused}
    time.sleep(args.settle)
    memory = memory_by_namespace(cluster)
    for name, row in results.items():
        row["memory_mib"] = round(memory.get(load_app(name).namespace, 0) / 2**20, 1)
    stack_bytes = memory.get(OBSERVABILITY_NAMESPACE, 0)
    total = sum(memory.get(r["namespace"], 0) for r in results.values()) + stack_bytes
    summary = {"apps": results, "observability_mib": round(stack_bytes / 2**20, 1),
               "total_mib": round(total / 2**20, 1), "target_mib": MEMORY_TARGET_BYTES // 2**20,
               "within_target": total <= MEMORY_TARGET_BYTES}
    misses = [] if summary["within_target"] else [f"memory {summary['total_mib']} MiB over {summary['target_mib']} MiB"]
    misses += [f"{name}: second deploy not reused" for name, row in results.items() if not row["reused"]]
    summary["misses"] = misses
    if args.json:
        print(json.dumps(summary, indent=2))
        return 1 if misses else 0
    print(f"{'app':<20} {'cold ready s':>12} {'reused s':>9} {'memory MiB':>11}")
    for name, row in results.items():
        print(f"{name:<20} {row['cold_ready_s']:>12} {row['reused_ready_s']:>9} {row['memory_mib']:>11}"
              + ("" if row["reused"] else "  (second deploy was NOT reused)"))
    print(f"{'observability':<20} {'':>12} {'':>9} {summary['observability_mib']:>11}")
    print(f"total {summary['total_mib']} MiB of a {summary['target_mib']} MiB target: "
          f"{'within' if summary['within_target'] else 'OVER'}")
    print(f"verdict: {'MISSES ' + '; '.join(misses) if misses else 'meets every target'}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
