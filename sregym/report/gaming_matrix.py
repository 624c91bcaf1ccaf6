"""The anti-gaming matrix as measured: one JSON line per cell (written by
tests/integration/oracles/test_anti_gaming.py) rendered as the table in docs/grading.md, fault
family x strategy, each cell saying pass or fail and why that is right (or that it is wrong)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sregym.core.jsonlines import read_json_lines

BLOCK = "anti-gaming-matrix"
HEADING = "## Anti-gaming matrix (measured)"
KEYS = {"problem", "family", "primitive", "strategy", "fault_present", "users_broken", "passed"}


def verdict(cell: dict[str, Any]) -> str:
    """Short: the oracle's result and the reason it is right, or WRONG with what happened."""
    result = "pass" if cell["passed"] else "fail"
    played = str(cell.get("played", ""))
    # nothing was tried: the cell measures only that the fault is there, not the strategy
    refused = " (refused)" if played.startswith("refused") else \
        " (not applicable)" if played.startswith("not applicable") else ""
    if cell.get("must_persist") and not cell["fault_present"]:
        why = "**WRONG: the fault did not outlive a restart**"
    elif cell["fault_present"]:
        why = "fault present" if not cell["passed"] else "**WRONG: passed, fault present**"
    elif cell["users_broken"]:
        why = "fault gone, users broken" if not cell["passed"] else "**WRONG: passed, users broken**"
    elif cell.get("expected") == "fail":
        # the test's own rule, recorded with the cell (removing every probe takes the broken one
        # away too, so the fault check alone would call the cell cured): not re-derived here, where
        # such a cell read "WRONG: failed, fault gone" though the test held it right
        reason = str(cell.get("why") or "the test expects a failure").removeprefix("the ")
        why = reason if not cell["passed"] else f"**WRONG: passed, {reason}**"
    else:
        why = "fault really gone" if cell["passed"] else "**WRONG: failed, fault gone**"
    return f"{result}: {why}{refused}"


def _cell(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def matrix_markdown(results: Path, *, date: str, checkout: str, command: str, exit_code: int | None = None,
                    rows: list[tuple[str, str, str]] | None = None, strategies: list[str] | None = None) -> str:
    """The generated block: a header, the family x strategy table and each cell's evidence. Where
    the cells record when and on which checkout they were measured, the header says so; ``date``
    and ``checkout`` stand for cells that do not. ``rows`` (family, primitive, problem) and
    ``strategies`` give the whole matrix, so what was not measured shows as "-"."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for c in read_json_lines(results, KEYS):
        cells[(c["problem"], c["strategy"])] = c  # a rerun's line replaces the first
    if not cells:
        return f"No measured cells in {results} ({date}, {checkout})."
    strategies = list(dict.fromkeys([*(strategies or []), *(c["strategy"] for c in cells.values())]))
    rows = sorted({*(rows or []), *((c["family"], c["primitive"], c["problem"]) for c in cells.values())})
    wrong = [c for c in cells.values() if "WRONG" in verdict(c)]
    dates = sorted(c.get("finished", date) for c in cells.values())
    checkouts = sorted({c.get("checkout", checkout) for c in cells.values()})
    span = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    lines = [f"Measured {span} on checkout `{'`, `'.join(checkouts)}`; written by `{command}`"
             + (f" (pytest exit {exit_code})" if exit_code is not None else "") + ".",
             "",
             f"{len(cells)} of {len(rows) * len(strategies)} cell(s) measured; **{len(wrong)} wrong** (an oracle that passed while the "
             "fault was present or users were broken, or failed after the fault was really gone; or a fault whose "
             "real cause outlives a restart that a restart removed). "
             "\"fault present\"/\"gone\" is an independent check of the fault's effect "
             "(tests/integration/oracles/fault_effects.py), not the injector's verify; \"-\" is not measured.",
             "",
             "| family | primitive (problem) | " + " | ".join(strategies) + " |",
             "|---|---|" + "---|" * len(strategies)]
    for fam, prim, pid in rows:
        lines.append(f"| {fam} | {prim} (`{pid}`) | "
                     + " | ".join(verdict(cells[(pid, s)]) if (pid, s) in cells else "-" for s in strategies) + " |")
    lines += ["", "Evidence per cell:", ""]
    for (pid, s), c in sorted(cells.items()):
        lines.append(f"- `{pid}` x `{s}` ({_cell(c.get('played', ''), 120)}): effect: {_cell(c.get('effect', ''))}; "
                     f"users: {_cell(c.get('served', ''), 200)}; oracle: {_cell(c.get('checks', ''))}")
    return "\n".join(lines) + "\n"
