"""How long an env reset takes on the live cluster: N seeded resets of one problem, each ending the
previous run (aborted, recovered) and playing the next to its agent phase.

Prints each reset's seconds and whether its run reused the app's SLO baseline (an undrifted
release, healthy, measured within the reuse period) or measured it again (its run record's
``baseline.measured`` says which), then, over the resets after the first (the first may deploy the
app and measures the baseline): the median and p95 of all of them, and the median of each kind,
with their ratios to the last figure measured before (``--before``) and to issue 21's target, a
10 s median. The target is the median of all the warm resets (what a training loop waits); the
command exits 1 when it is missed, or when no warm reset reused the baseline.

    flock /tmp/sg/cluster.lock python3 benchmarks/gym_reset.py --problem hotel_frontend_scaled_to_zero \\
        --baseline-window 5 --resets 5
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

from sregym.gym import IncidentEnv

TESTS = Path(__file__).resolve().parent.parent / "tests" / "integration" / "conductor"
TARGET_S = 10.0
BEFORE_S = 10.7  # the median of the same command at 9217f8a (2026-11-27 18:01, all warm resets reused)


def p95(values: list[float]) -> float:
    """The nearest-rank 95th percentile (of a few resets: their largest but one, or the largest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def baseline_kinds(out: Path, before: set[str]) -> list[str]:
    """``reused`` or ``measured`` for each run recorded in ``out`` since ``before``, oldest first."""
    records = []
    for path in sorted(set(out.glob("*.json")) - {out / name for name in before}):
        record = json.loads(path.read_text())
        measured = str((record.get("baseline") or {}).get("measured") or "")
        records.append((record.get("started_at") or "", "reused" if measured.startswith("reused") else "measured"))
    return [kind for _, kind in sorted(records)]


def line(name: str, values: list[float]) -> str:
    if not values:
        return f"{name}: none"
    median = statistics.median(values)
    return (f"{name}: median {median:.1f}s over {len(values)} ({', '.join(f'{t:.1f}' for t in values)}); "
            f"ratio to the {TARGET_S:.0f}s target {median / TARGET_S:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="tiny_settings_drift")
    ap.add_argument("--resets", type=int, default=5)
    ap.add_argument("--baseline-window", type=float, default=1.0)
    ap.add_argument("--out", default="runs/bench-gym-reset")
    ap.add_argument("--before", type=float, default=BEFORE_S, help="the median to compare with (seconds)")
    args = ap.parse_args()
    if args.resets < 2:
        ap.error("--resets must be at least 2: the first reset may deploy the app and is not counted")
    out = Path(args.out)
    before = {p.name for p in out.glob("*.json")} if out.is_dir() else set()
    env = IncidentEnv(args.problem, problems_dirs=[TESTS / "problems"], out_dir=out,
                      settings={"noise": False, "baseline_window": args.baseline_window, "grade_window": 3,
                                "charts_dirs": [str(TESTS / "charts")]})
    times = []
    try:
        for i in range(args.resets):
            t0 = time.monotonic()
            env.reset(seed=i)
            times.append(time.monotonic() - t0)
            print(f"reset {i}: {times[-1]:.1f}s", flush=True)
        t0 = time.monotonic()
    finally:
        env.close()
    print(f"close (abort + recover): {time.monotonic() - t0:.1f}s")
    kinds = baseline_kinds(out, before)
    if len(kinds) != len(times):
        print(f"cannot tell the baselines: {len(kinds)} record(s) for {len(times)} reset(s)", file=sys.stderr)
        kinds = ["?"] * len(times)
    print("resets: " + ", ".join(f"{t:.1f}s ({k})" for t, k in zip(times, kinds)))
    warm, warm_kinds = times[1:], kinds[1:]
    median = statistics.median(warm)
    reused = [t for t, k in zip(warm, warm_kinds) if k == "reused"]
    measured = [t for t, k in zip(warm, warm_kinds) if k == "measured"]
    print(f"warm resets (after the first, {times[0]:.1f}s, which may deploy the app): median {median:.1f}s, "
          f"p95 {p95(warm):.1f}s over {len(warm)}; ratio to before ({args.before:.1f}s) {median / args.before:.2f}, "
          f"to the {TARGET_S:.0f}s target {median / TARGET_S:.2f}")
    print(line("  that reused the baseline", reused))
    print(line("  that measured it again", measured))
    missed = []
    if median > TARGET_S:
        missed.append(f"median warm reset {median:.1f}s > {TARGET_S:.0f}s")
    if not reused:
        missed.append("no warm reset reused the baseline")
    if missed:
        print("MISSED: " + "; ".join(missed), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
