"""Do two suite runs agree cell for cell? (issue 20: the nightly chart's jobs night against a serial run)

    python scripts/compare_suite_runs.py RESULTS_A RESULTS_B

Each argument is a results directory (``sregym suite run --out``; the chart's
``/results/runs/<suite>-<date>``). Cells are keyed by (agent, problem, seed, noise). For every
cell both runs must hold a record, and these must be equal:

- what the leaderboard counts of the run (``sregym.report.metrics.run_facts``): completed,
  diagnosis, mitigation, mitigation submitted, steps, invalid actions, actions and tool mix, tokens,
  wrong remediation, evidence coverage, the reward and its components (rounded to 1e-6);
- what the seed decides: the problem's spec hash (when both ran in the same namespace: a slot
  namespace rewrites the problem), the run settings (agent and its options, seed,
  noise, budgets, windows), the mechanism each fault ran with, and the timeline's resolved fault and
  noise events (name, injector, target, params, mechanism, ok; the slot namespace written as
  ``<ns>``, since a cell run beside another gets ``<namespace>-p<k>``);
- the status, and the name and verdict of each mitigation check.

Left out, since they are not fixed by the seed: run ids, start and end times, phase durations,
times to diagnose/mitigate, the ``budget_used`` bookkeeping term, oracle evidence (measured
values), and error messages (an error cell compares by status only). Prints one line per cell and
each difference; exit code 0 when every cell matches, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sregym.core.errors import UserInputError
from sregym.core.record import RunRecord
from sregym.report.metrics import run_facts
from sregym.report.records import load_records

Cell = tuple[str, str, int, bool]
FACTS = ("completed", "diagnosis", "mitigation", "mitigation_submitted", "steps", "invalid_actions", "actions",
         "tools", "tokens", "wrong_remediation", "evidence_coverage", "reward", "reward_terms", "difficulty",
         "layer", "failure_mode")
SETTINGS = ("agent", "agent_options", "seed", "noise", "budget_steps", "budget_seconds", "budget_tokens",
            "baseline_window", "grade_window", "verify_timeout")
EVENT = ("at", "action", "kind", "name", "injector", "target", "params", "mechanism", "ok")


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    return value


def _unslot(value: Any, namespace: str) -> Any:
    """``value`` with the run's app namespace written as ``<ns>`` (strings, lists and dicts)."""
    if isinstance(value, str):
        return value.replace(namespace, "<ns>") if namespace else value
    if isinstance(value, list | tuple):
        return [_unslot(v, namespace) for v in value]
    if isinstance(value, dict):
        return {k: _unslot(v, namespace) for k, v in value.items()}
    return value


def outcome(record: RunRecord) -> dict[str, Any]:
    """The fields of one record that two runs of the same cell must agree on (module docstring)."""
    facts = run_facts(record)
    out: dict[str, Any] = {f"facts.{name}": _round(getattr(facts, name)) for name in FACTS}
    out["status"] = record.status
    out["spec_hash"] = record.spec_hash
    settings = record.settings.model_dump() if record.settings else {}
    out.update({f"settings.{k}": settings.get(k) for k in SETTINGS})
    out["mechanisms"] = dict(record.mechanisms)
    out["timeline"] = [_unslot(_round(e.model_dump(include=set(EVENT))), record.namespace) for e in record.timeline]
    mitigation = record.grades.mitigation
    out["mitigation_checks"] = [(c.name, c.passed) for c in mitigation.checks] if mitigation else None
    return out


def by_cell(directory: Path) -> dict[Cell, RunRecord]:
    """The records of one results directory by cell (a retried cell: its last run, as reports read it)."""
    if not directory.is_dir():
        raise UserInputError(f"{directory}: not a results directory")
    records = load_records([directory])
    return {(r.agent.name, r.problem_id, r.seed, r.noise): r for r in records}


def compare(a: dict[Cell, RunRecord], b: dict[Cell, RunRecord]) -> tuple[list[str], int]:
    """Report lines and the number of cells that differ (a cell missing on one side differs)."""
    lines, differ = [], 0
    for cell in sorted(set(a) | set(b)):
        name = "/".join(str(x) for x in (cell[0], cell[1], f"seed{cell[2]}", "noise" if cell[3] else "quiet"))
        if cell not in a or cell not in b:
            differ += 1
            lines.append(f"DIFF  {name}: only in {'A' if cell in a else 'B'}")
            continue
        oa, ob = outcome(a[cell]), outcome(b[cell])
        # a cell run in a slot namespace (<namespace>-p<k>) plays the problem rewritten to it: its spec hash differs
        same_ns = a[cell].namespace == b[cell].namespace
        diffs = [k for k in oa if oa[k] != ob[k] and (k != "spec_hash" or same_ns)]
        if diffs:
            differ += 1
            lines.append(f"DIFF  {name}")
            lines += [f"        {k}: A={oa[k]!r} B={ob[k]!r}" for k in diffs]
        else:
            m = oa["facts.mitigation"]
            lines.append(f"same  {name}: status={oa['status']} mitigation={m} diagnosis={oa['facts.diagnosis']} "
                         f"reward={oa['facts.reward']}")
    return lines, differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="results directory A (e.g. the serial run)")
    parser.add_argument("b", type=Path, help="results directory B (e.g. the chart's jobs night)")
    args = parser.parse_args(argv)
    try:
        a, b = by_cell(args.a), by_cell(args.b)
    except UserInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not a and not b:
        print("error: neither directory holds a run record", file=sys.stderr)
        return 2
    lines, differ = compare(a, b)
    print("\n".join(lines))
    print(f"{len(set(a) | set(b))} cells, {differ} differ" + ("" if differ else ": the runs agree cell for cell"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
