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
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

from cell_resources import Sampler
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "integration" / "conductor"
PROBLEM = "tiny_settings_drift"


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
    args = parser.parse_args(argv)

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
    if not rates.get(1):
        print("ratio: - (no cell completed at parallel 1)")
        return 1
    ratio = rates[2] / rates[1]
    print(f"ratio (2 concurrent / 1): {ratio:.2f}")
    print(f"projection for {args.nodes} nodes, each sustaining the measured 2-cell rate: "
          f"{rates[2] * args.nodes:.0f} cells/hour (an upper bound: shared images, API server and apps are not "
          "measured here)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
