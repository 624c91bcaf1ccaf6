"""CPU and memory of a suite's cells while they run: each cell's Job pod and the app namespaces it drives.

    python benchmarks/cell_resources.py --cells-namespace sregym-nightly --app-namespace hotel \
        --app-namespace hotel-p1 --app-namespace online-shop [--until-job tonight] [--seconds 1800] [--every 5]

Samples every kubelet's summary API (``/api/v1/nodes/<node>/proxy/stats/summary``, the figures
``kubectl top`` reads) every ``--every`` seconds, until the Job ``--until-job`` (in the cells'
namespace) ends or ``--seconds`` pass, then prints, per cell pod (``app.kubernetes.io/component=
suite-cell``, i.e. one cell), its mean and peak CPU (millicores) and peak working-set memory (MiB),
and per app namespace the same for the sum of its pods (samples where it had pods). Read-only: it
never changes the cluster. ``benchmarks/suite_throughput.py`` uses the same sampler.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from dataclasses import dataclass, field

from _figures import quantile

COMPONENT = ("app.kubernetes.io/component", "suite-cell")


@dataclass
class Series:
    """Samples of one pod (or one namespace's pods summed): CPU in millicores, memory in MiB."""

    cpu_m: list[float] = field(default_factory=list)
    mem_mib: list[float] = field(default_factory=list)

    def add(self, cpu_m: float, mem_mib: float) -> None:
        self.cpu_m.append(cpu_m)
        self.mem_mib.append(mem_mib)

    def row(self) -> dict[str, float]:
        return {"samples": len(self.cpu_m), "cpu_mean_m": round(sum(self.cpu_m) / len(self.cpu_m), 1),
                "cpu_p95_m": round(quantile(self.cpu_m, 0.95), 1), "cpu_peak_m": round(max(self.cpu_m), 1),
                "mem_peak_mib": round(max(self.mem_mib), 1)}


def pod_usage(summary: dict) -> list[tuple[str, str, float, float]]:
    """(namespace, pod, CPU millicores, working-set MiB) of every pod in one kubelet summary; a pod the
    kubelet has no figures for yet is left out."""
    out = []
    for pod in summary.get("pods", []):
        cpu, mem = pod.get("cpu") or {}, pod.get("memory") or {}
        if cpu.get("usageNanoCores") is None or mem.get("workingSetBytes") is None:
            continue
        out.append((pod["podRef"]["namespace"], pod["podRef"]["name"], cpu["usageNanoCores"] / 1e6,
                    mem["workingSetBytes"] / 2**20))
    return out


class Sampler:
    """Samples pod usage in a thread: the cell pods of ``cells_namespace`` and the sum of each of
    ``app_namespaces``."""

    def __init__(self, kube, cells_namespace: str, app_namespaces: list[str], every: float = 5.0):
        self.kube, self.cells_ns, self.apps, self.every = kube, cells_namespace, list(app_namespaces), every
        self.cells: dict[str, Series] = {}
        self.namespaces: dict[str, Series] = {}
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _cell_pods(self) -> set[str]:
        pods = self.kube.core.list_namespaced_pod(self.cells_ns, label_selector="=".join(COMPONENT)).items
        return {p.metadata.name for p in pods}

    def sample(self) -> None:
        cells = self._cell_pods()
        sums: dict[str, list[float]] = {}
        for node in self.kube.core.list_node().items:
            raw = self.kube.kubectl("get", "--raw", f"/api/v1/nodes/{node.metadata.name}/proxy/stats/summary",
                                    check=False).stdout
            if not raw:
                self.errors += 1
                continue
            for ns, pod, cpu, mem in pod_usage(json.loads(raw)):
                if ns == self.cells_ns and pod in cells:
                    self.cells.setdefault(pod, Series()).add(cpu, mem)
                elif ns in self.apps:
                    s = sums.setdefault(ns, [0.0, 0.0])
                    s[0] += cpu
                    s[1] += mem
        for ns, (cpu, mem) in sums.items():
            self.namespaces.setdefault(ns, Series()).add(cpu, mem)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # a sample lost to a busy API server is a gap, not the end of the measurement
                self.errors += 1
            self._stop.wait(self.every)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def report(self) -> list[str]:
        lines = [f"{'cell pod / app namespace':<34} {'samples':>7} {'CPU mean m':>10} {'p95 m':>7} {'peak m':>7} "
                 f"{'mem peak MiB':>12}"]
        for name, series in [*sorted(self.cells.items()), *sorted(self.namespaces.items())]:
            r = series.row()
            lines.append(f"{name:<34} {r['samples']:>7} {r['cpu_mean_m']:>10} {r['cpu_p95_m']:>7} "
                         f"{r['cpu_peak_m']:>7} {r['mem_peak_mib']:>12}")
        if self.cells:
            rows = [s.row() for s in self.cells.values()]
            lines.append(f"cell pods ({len(rows)}): CPU mean of means {sum(r['cpu_mean_m'] for r in rows) / len(rows):.0f}m, "
                         f"largest peak {max(r['cpu_peak_m'] for r in rows):.0f}m; memory largest peak "
                         f"{max(r['mem_peak_mib'] for r in rows):.0f} MiB, median peak "
                         f"{quantile([r['mem_peak_mib'] for r in rows], 0.5):.0f} MiB")
        if self.errors:
            lines.append(f"({self.errors} samples lost)")
        return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells-namespace", required=True, help="namespace of the cells' Jobs (the chart's release)")
    parser.add_argument("--app-namespace", action="append", default=[], help="an app (slot) namespace; repeatable")
    parser.add_argument("--until-job", help="stop when this Job of the cells' namespace has ended")
    parser.add_argument("--seconds", type=float, default=3600, help="stop after this long at the latest")
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    args = parser.parse_args(argv)

    from pathlib import Path

    from sregym.cluster.providers import current_cluster
    from sregym.conductor.suite_jobs import job_outcome

    kube = current_cluster(Path(args.kubeconfig) if args.kubeconfig else None, args.context).kube
    sampler = Sampler(kube, args.cells_namespace, args.app_namespace, args.every).start()
    end = time.monotonic() + args.seconds
    try:
        while time.monotonic() < end:
            if args.until_job:
                job = kube.batch.read_namespaced_job_status(args.until_job, args.cells_namespace)
                if job_outcome(kube.api_client.sanitize_for_serialization(job.status)) is not None:
                    break
            time.sleep(args.every)
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
    print("\n".join(sampler.report()))
    return 0 if sampler.cells or sampler.namespaces else 1


if __name__ == "__main__":
    sys.exit(main())
