"""Suite throughput on this cluster: cells per hour at 1 and 2 concurrent cells, and the ratio.

    flock /tmp/sg/cluster.lock python benchmarks/suite_throughput.py [--cells 4] [--executor jobs|threads]

Runs the conductor tests' tiny problem (a ConfigMap drift on a one-pod app; slot namespaces let
two cells of it run at once) with the noop agent, ``--cells`` cells (seeds 0..N-1, noise off) once
with ``--parallel 1`` and once with ``--parallel 2``, each into a fresh results folder, and prints
cells/hour for both and their ratio. With ``--executor jobs`` (the default) each cell is a
Kubernetes Job from the suite-runner image (built and loaded first; the local cluster only, since
the results folder is mounted from this host). Also prints a projection for a lab of ``--nodes``
nodes that assumes each node sustains the measured 2-cell rate (say so when you quote it: apps,
images and the API server are shared and will bend that line). With ``--executor jobs`` it also
prints each cell's resource use at each concurrency: CPU and memory of the cell's Job pod and of
the app namespaces it drives (``benchmarks/cell_resources.py``). Needs the cluster to itself.

    python benchmarks/suite_throughput.py --from-runs SERIAL_RESULTS NIGHT_RESULTS

measures nothing new: it reads the records of two suite runs of real problems that were already
made (the same cells at ``--parallel 1`` and at ``--parallel 2``, e.g. a serial run and the nightly
chart's night, each possibly in resumed parts) and prints the same figures, cells/hour being the
completed cells over the time at least one cell of the run was running (the union of the records'
start-to-end intervals: a pause between resumed parts is not counted, nor the seconds a cell's Job
takes to start its pod).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cell_resources import Sampler
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "integration" / "conductor"
PROBLEM = "tiny_settings_drift"


@dataclass
class Rate:
    done: int      # completed cells
    busy: float    # seconds during which at least one cell ran

    @property
    def per_hour(self) -> float:
        return self.done / self.busy * 3600 if self.busy else 0.0


def busy_seconds(spans: list[tuple[datetime, datetime]]) -> float:
    """Length of the union of the intervals: the time at least one cell was running."""
    total, end = 0.0, None
    for start, stop in sorted(spans):
        if end is None or start > end:
            total += (stop - start).total_seconds()
            end = stop
        elif stop > end:
            total += (stop - end).total_seconds()
            end = stop
    return total


def rate_of(records: list[tuple[str, datetime, datetime | None]]) -> Rate:
    """(status, started_at, ended_at) of every record of a run: completed cells over busy time (every
    record's time counts, also a cell that was cut and rerun)."""
    for status, start, stop in records:
        if stop is None:
            raise ValueError(f"a {status} record started at {start} has no end time")
    return Rate(sum(1 for status, _, _ in records if status == "completed"),
                busy_seconds([(start, stop) for _, start, stop in records]))


def rate_of_run(results: Path) -> Rate:
    from sregym.report.records import load_records

    return rate_of([(r.status, r.started_at, r.ended_at) for r in load_records([results])])


def print_rates(rates: dict[int, float], nodes: int) -> int:
    if not rates.get(1):
        print("ratio: - (no cell completed at parallel 1)")
        return 1
    ratio = rates[2] / rates[1]
    print(f"ratio (2 concurrent / 1): {ratio:.2f}")
    print(f"projection for {nodes} nodes, each sustaining the measured 2-cell rate: "
          f"{rates[2] * nodes:.0f} cells/hour (an upper bound: shared images, API server and apps are not "
          "measured here)")
    return 0


def from_runs(serial: Path, night: Path, nodes: int) -> int:
    rates = {}
    for parallel, results in ((1, serial), (2, night)):
        rate = rate_of_run(results)
        rates[parallel] = rate.per_hour
        print(f"parallel {parallel}: {rate.done} cells completed in {rate.busy:.0f} s of running cells = "
              f"{rate.per_hour:.1f} cells/hour ({results})", flush=True)
    return print_rates(rates, nodes)


def run_suite(cluster, parallel: int, cells: int, out: Path, run_fn) -> tuple[float, int]:
    """Seconds for ``cells`` cells at ``parallel``, and how many completed."""
    from sregym.conductor.suite import SuiteRunner
    from sregym.core.loader import load_problem_arg
    from sregym.core.settings import RunSettings

    problem = load_problem_arg(PROBLEM, [TINY / "problems"]).problem
    settings = RunSettings(agent="noop", budget_seconds=10, baseline_window=1, grade_window=3, verify_timeout=30,
                           charts_dirs=[TINY / "charts"])
    runner = SuiteRunner([problem], suite="throughput", settings=settings, seeds=range(cells), noise=[False],
                         out_dir=out, cluster=cluster, run_fn=run_fn, parallel=parallel, max_consecutive_errors=cells,
                         console=Console(stderr=True))
    started = time.monotonic()
    summary = runner.run()
    return time.monotonic() - started, summary.statuses.get("completed", 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=4, help="cells per measurement (seeds 0..N-1)")
    parser.add_argument("--executor", choices=("jobs", "threads"), default="jobs")
    parser.add_argument("--nodes", type=int, default=10, help="nodes of the lab the projection is for")
    parser.add_argument("--from-runs", nargs=2, type=Path, metavar=("SERIAL", "NIGHT"),
                        help="no run: rates from two results folders of the same cells at --parallel 1 and 2")
    args = parser.parse_args(argv)
    if args.from_runs:
        missing = [str(p) for p in args.from_runs if not p.is_dir()]
        if missing:
            print(f"--from-runs: no such results folder: {', '.join(missing)}")
            return 2
        return from_runs(*args.from_runs, args.nodes)

    sys.path.insert(0, str(ROOT / "tests"))
    from live import local_socket

    from sregym.cluster.images import build_images
    from sregym.cluster.providers import current_cluster
    from sregym.conductor.suite_jobs import JobCellRunner, JobPod, create_cell_account

    cluster = current_cluster()
    remove = None
    run_fn = None
    # a namespace still terminating (a test just deleted it) is not one to keep
    slots = [n.metadata.name for n in cluster.kube.core.list_namespace().items if n.status.phase == "Active"]
    if args.executor == "jobs":
        socket = local_socket(cluster)
        if socket is None:
            print("--executor jobs mounts the results folder from this host: the local cluster only")
            return 2
        image = build_images(["suite-runner"], provider="local", cluster=cluster.name, socket=socket)[-1].refs[0]
        ns = f"throughput-{uuid.uuid4().hex[:6]}"
        remove = create_cell_account(cluster.kube, ns, "suite")
        run_fn = JobCellRunner(JobPod(namespace=ns, image=image, image_pull_policy="Never", service_account="suite",
                                      overhead_seconds=240, poll_seconds=1, host_network=True,
                                      volumes=[{"name": "tiny", "hostPath": {"path": str(TINY), "type": "Directory"}}],
                                      volume_mounts=[{"name": "tiny", "mountPath": str(TINY), "readOnly": True}]),
                               problems_dirs=[TINY / "problems"])
    rates: dict[int, float] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="sregym-throughput-") as tmp:
            for parallel in (1, 2):
                sampler = Sampler(cluster.kube, ns, ["tiny", "tiny-p1"]).start() if run_fn else None
                try:
                    seconds, done = run_suite(cluster, parallel, args.cells, Path(tmp) / f"p{parallel}", run_fn)
                finally:
                    if sampler:
                        sampler.stop()
                rates[parallel] = done / seconds * 3600
                print(f"parallel {parallel}: {done}/{args.cells} cells completed in {seconds:.0f} s = "
                      f"{rates[parallel]:.1f} cells/hour ({args.executor})", flush=True)
                if sampler:
                    print("\n".join(sampler.report()), flush=True)
    finally:
        if remove is not None:
            remove()
        if "tiny-p1" not in slots:  # the second slot namespace this benchmark made
            cluster.kube.kubectl("delete", "namespace", "tiny-p1", "--ignore-not-found", "--wait=false", check=False)
    return print_rates(rates, args.nodes)


if __name__ == "__main__":
    sys.exit(main())
