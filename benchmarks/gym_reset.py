"""How long an env reset takes on the live cluster: N seeded resets of one problem, each ending the
previous run (aborted, recovered) and playing the next to its agent phase. Prints each reset's
seconds and the median. Issue 21's target for fast reset is a 10 s median.

    flock /tmp/sg/cluster.lock python3 benchmarks/gym_reset.py --resets 5
    python3 benchmarks/gym_reset.py --problem hotel_frontend_scaled_to_zero --baseline-window 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from sregym.gym import IncidentEnv

TESTS = Path(__file__).resolve().parent.parent / "tests" / "integration" / "conductor"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="tiny_settings_drift")
    ap.add_argument("--resets", type=int, default=5)
    ap.add_argument("--baseline-window", type=float, default=1.0)
    ap.add_argument("--out", default="runs/bench-gym-reset")
    args = ap.parse_args()
    env = IncidentEnv(args.problem, problems_dirs=[TESTS / "problems"], out_dir=args.out,
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
    print(f"median reset {statistics.median(times):.1f}s over {len(times)} (first includes deploy or reuse)")


if __name__ == "__main__":
    main()
