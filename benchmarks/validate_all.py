"""How long ``sregym validate`` takes per problem, against issue 18's targets.

    python benchmarks/validate_all.py                      # the lite suite's problems
    python benchmarks/validate_all.py --all                # every problem of the catalog
    python benchmarks/validate_all.py hotel_db_port_wrong shop_db_pool_leak

The problems are validated one after another on the current cluster as ``sregym validate --all``
does (one process, one app driver; a problem's wall time counts deploy-or-reuse and every step),
each result appended to ``--log`` in the format of ``sregym validate --log``. Prints each
problem's wall seconds and verdict, then the median, p95 and total, and their ratio to the figures
issue 18 measured before (median about 100 s per problem, ``validate --all`` 107 minutes for 44
problems). Exits 1 when a target is missed (median
<= 40 s, p95 <= 120 s) or a problem is not valid, 2 when nothing could be measured. A script,
not a timed test: run it on an otherwise idle cluster (``flock /tmp/sg/cluster.lock ...`` where
the cluster is shared).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from sregym.core.loader import load_catalog

from _figures import quantile

TARGET_MEDIAN_S = 40.0
TARGET_P95_S = 120.0
# issue 18, measured 2026-11-25 on the 2-core machine (docs/validation.md before the speed-ups)
BEFORE_MEDIAN_S = 100.0
BEFORE_ALL_S, BEFORE_ALL_PROBLEMS = 107 * 60.0, 44


def chosen_problems(args: argparse.Namespace) -> list[str]:
    catalog = load_catalog()
    if args.problems:
        return list(args.problems)
    if args.all:
        return sorted(catalog.problems)
    return [lp.id for lp in catalog.suite_problems(args.suite)]


async def validate_all(problems: list[str], args: argparse.Namespace, log: Path) -> dict[str, list[dict]]:
    """Validate each problem for each seed, one after another, as ``sregym validate --all`` does
    (one process, one app driver); each result is appended to ``log`` with its wall seconds
    (deploy-or-reuse and every step) and printed as it finishes."""
    from sregym.cluster.providers import current_cluster
    from sregym.apps import app_driver
    from sregym.conductor.validate import validate_problem
    from sregym.core.jsonlines import append_json_line

    catalog = load_catalog()
    cluster = current_cluster(args.kubeconfig, None)
    driver = app_driver()
    results: dict[str, list[dict]] = {}
    for i, pid in enumerate(problems, 1):
        problem = catalog.problem(pid).problem
        for seed in range(args.seeds):
            start = time.monotonic()
            res = await validate_problem(problem, cluster=cluster, driver=driver, seed=seed, noise=args.noise,
                                         **({"grade_window": args.grade_window} if args.grade_window else {}))
            entry = res.record(time.monotonic() - start)
            append_json_line(log, entry)
            results.setdefault(pid, []).append(entry)
            steps = ", ".join(f"{s['name']} {s['seconds']:.0f}s" for s in entry["steps"])
            bad = next((s for s in entry["steps"] if not s["ok"]), None)
            print(f"[{i}/{len(problems)}] {pid:<40} seed {seed} {entry['wall_seconds']:6.1f} s  "
                  f"{'valid' if res.ok else 'INVALID'}  ({steps})" + (f"\n    {bad['name']}: {bad['detail']}"
                                                                       if bad else ""), flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", help="problem ids (default: the --suite's problems)")
    parser.add_argument("--all", action="store_true", help="every problem of the catalog")
    parser.add_argument("--suite", default="lite", help="the suite whose problems to validate (default: lite)")
    parser.add_argument("--seeds", type=int, default=1, help="run seeds per problem (default 1; CI validates one)")
    parser.add_argument("--noise", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--grade-window", type=float, default=None, help="passed to sregym validate")
    parser.add_argument("--kubeconfig", type=Path, default=None)
    parser.add_argument("--log", type=Path, default=None, help="keep the validate log here (default: a temp file)")
    args = parser.parse_args(argv)
    problems = chosen_problems(args)
    log = args.log or Path(tempfile.mkdtemp(prefix="validate-all-")) / "validate.jsonl"
    print(f"validating {len(problems)} problem(s), seeds {args.seeds}, noise {'on' if args.noise else 'off'}; "
          f"log {log}", flush=True)
    started = time.monotonic()
    results = anyio.run(validate_all, problems, args, log)
    # per validation (a problem with N seeds is validated N times)
    walls = {pid: sum(e["wall_seconds"] for e in es) / len(es) for pid, es in results.items()}
    invalid = [pid for pid in problems if not results.get(pid) or not all(e["ok"] for e in results[pid])]
    total = time.monotonic() - started
    values = list(walls.values())
    if not values:
        print("verdict: MISSES nothing measured")
        return 2
    med, p95 = statistics.median(values), quantile(values, 0.95)
    print(f"\nper problem: median {med:.1f} s, p95 {p95:.1f} s, max {max(values):.1f} s; "
          f"total {total:.0f} s ({total / 60:.1f} min) for {len(values)}")
    before_total = BEFORE_ALL_S / BEFORE_ALL_PROBLEMS * len(values)
    print(f"vs issue 18's figures: median {BEFORE_MEDIAN_S:.0f} s -> {med:.1f} s "
          f"({BEFORE_MEDIAN_S / med:.1f}x faster); "
          f"total at its {BEFORE_ALL_S / BEFORE_ALL_PROBLEMS:.0f} s per problem {before_total:.0f} s -> {total:.0f} s "
          f"({before_total / total:.1f}x faster)")
    misses = []
    if med > TARGET_MEDIAN_S:
        misses.append(f"median {med:.1f} s > {TARGET_MEDIAN_S:.0f} s")
    if p95 > TARGET_P95_S:
        misses.append(f"p95 {p95:.1f} s > {TARGET_P95_S:.0f} s")
    if invalid:
        misses.append(f"not valid: {', '.join(invalid)}")
    print(f"targets: median <= {TARGET_MEDIAN_S:.0f} s, p95 <= {TARGET_P95_S:.0f} s, every problem valid")
    print("verdict: " + ("meets every target" if not misses else "MISSES " + "; ".join(misses)))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
