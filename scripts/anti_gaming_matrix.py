"""Measure the anti-gaming matrix on the live cluster and write its table into docs/grading.md.

    flock /tmp/sg/cluster.lock python3 scripts/anti_gaming_matrix.py --cases ci     # CI subset, ~10 min
    flock /tmp/sg/cluster.lock python3 scripts/anti_gaming_matrix.py --cases full   # every cell, hours
    python3 scripts/anti_gaming_matrix.py --render-only                              # redraw the table

Each cell is measured once (no rerun) and appended to docs/anti-gaming-log.jsonl (committed, like the
validation log: the matrix takes hours, so it is measured a few cells at a time and the table shows
the latest line of every cell measured so far). A thin script: the cells are tests/integration/oracles/test_anti_gaming.py (pytest), the table is
sregym.report.gaming_matrix; this only runs one and feeds the other. Exit status is pytest's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # shared test helpers (shop_users), as pytest's rootdir conftest has them
sys.path.insert(0, str(ROOT / "tests" / "integration" / "oracles"))

from sregym.report.docblock import checkout, write_block  # noqa: E402
from sregym.report.gaming_matrix import BLOCK, HEADING, matrix_markdown  # noqa: E402


def whole_matrix() -> tuple[list[tuple[str, str, str]], list[str]]:
    """Every row (family, primitive, problem) and column of the matrix, as the test defines them."""
    from gaming_strategies import STRATEGIES
    from test_anti_gaming import catalog_problems, representatives

    return [(*k, p.id) for k, p in representatives(catalog_problems()).items()], list(STRATEGIES)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="ci", help="ci (every family once), full (every cell), or id:strategy,...")
    ap.add_argument("--results", type=Path, default=ROOT / "docs" / "anti-gaming-log.jsonl",
                    help="JSON lines of the cells (appended; a cell measured again replaces its row)")
    ap.add_argument("--into", type=Path, default=ROOT / "docs" / "grading.md")
    ap.add_argument("--render-only", action="store_true", help="only write the table of --results")
    ap.add_argument("--measured", default=None,
                    help="with --render-only: 'DATE@CHECKOUT' for result lines that do not record their own")
    args = ap.parse_args()
    command = "python3 scripts/anti_gaming_matrix.py " + shlex.join(sys.argv[1:])
    code = None
    if not args.render_only:
        env = {**os.environ, "SREGYM_ANTIGAMING_CASES": args.cases, "SREGYM_ANTIGAMING_RESULTS": str(args.results)}
        code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:rerunfailures", "-s",
                               "-k", "gaming_strategy",
                               "tests/integration/oracles/test_anti_gaming.py"], cwd=ROOT, env=env).returncode
    rows, strategies = whole_matrix()
    date, _, version = (args.measured or "").partition("@")
    table = matrix_markdown(args.results, date=date or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            checkout=version or checkout(), command=command, exit_code=code, rows=rows,
                            strategies=strategies)
    write_block(args.into, BLOCK, table, heading=HEADING)
    print(f"wrote the matrix table into {args.into}")
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
