"""The framework's own time per run: everything but the agent, from the records' ``phases``.

    python benchmarks/suite_overhead.py RESULTS_DIR [RESULTS_DIR ...]

For every run record under the given results directories, framework time = the run's wall time
(``ended_at - started_at``, or the sum of its phases when it has no end time) minus the agent
phase. Prints the median and p95 over runs, the same for each phase, their ratio to issue 18's
figures (median 98.6 s, p95 169 s on 2026-11-25) and whether the median meets its target (at most
30 s per run on the local cluster); the exit code is 1 when it misses it (or there are no runs to
measure). Baseline and grading windows are part of the
framework's time: they are waits the benchmark chooses, and they are shown per phase.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from sregym.core.record import RunRecord
from sregym.report.records import load_records

from _figures import quantile

TARGET_MEDIAN_S = 30.0
BEFORE_MEDIAN_S, BEFORE_P95_S = 98.6, 169.0  # issue 18, 5 runs of benchmarks/suite_overhead.py, 2026-11-25
AGENT_PHASE = "agent"


def framework_seconds(record: RunRecord) -> float | None:
    """Wall time of the run less the agent's; None when the record has no timings."""
    if not record.phases:
        return None
    if record.ended_at is not None:
        total = (record.ended_at - record.started_at).total_seconds()
    else:
        total = sum(record.phases.values())
    return max(0.0, total - record.phases.get(AGENT_PHASE, 0.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path, help="results directories of suite runs")
    parser.add_argument("--all", action="store_true", help="include runs that ended in an error")
    args = parser.parse_args(argv)
    records = [r for r in load_records(args.results) if args.all or r.status == "completed"]
    overhead = [(r, s) for r in records if (s := framework_seconds(r)) is not None]
    if not overhead:
        print("no completed run records with phase timings under " + ", ".join(map(str, args.results)))
        print("verdict: MISSES no runs to measure")
        return 1
    values = [s for _, s in overhead]
    med, p95 = statistics.median(values), quantile(values, 0.95)
    print(f"runs: {len(values)} (suites: {', '.join(sorted({r.suite or '-' for r, _ in overhead}))})")
    print(f"framework time per run (all but the agent): median {med:.1f} s, p95 {p95:.1f} s, "
          f"max {max(values):.1f} s")
    phases = sorted({p for r, _ in overhead for p in r.phases})
    for p in phases:
        vals = [r.phases[p] for r, _ in overhead if p in r.phases]
        tag = "  (agent: not framework time)" if p == AGENT_PHASE else ""
        print(f"  {p:<10} median {statistics.median(vals):7.1f} s   p95 {quantile(vals, 0.95):7.1f} s{tag}")
    print(f"vs issue 18's figures: median {BEFORE_MEDIAN_S:.1f} s -> {med:.1f} s ({BEFORE_MEDIAN_S / max(med, 0.1):.1f}x), "
          f"p95 {BEFORE_P95_S:.0f} s -> {p95:.1f} s ({BEFORE_P95_S / max(p95, 0.1):.1f}x)")
    meets = med <= TARGET_MEDIAN_S
    print(f"target: median at most {TARGET_MEDIAN_S:.0f} s -> {'meets' if meets else 'misses'}")
    print(f"verdict: {'meets every target' if meets else f'MISSES median {med:.1f} s (target <= {TARGET_MEDIAN_S:.0f} s)'}")
    return 0 if meets else 1


if __name__ == "__main__":
    sys.exit(main())
