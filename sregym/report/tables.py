"""Text forms of metrics: one formatter for estimates, and the report's markdown tables."""

from __future__ import annotations

from collections.abc import Sequence

from sregym.report.bootstrap import Estimate
from sregym.report.metrics import METRIC_BY_NAME, GroupMetrics

# The columns of the main table, in the order a reader compares agents.
HEADLINE = ("e2e", "diagnosis", "mitigation", "reward", "ttd_s", "ttm_s", "tokens", "steps",
            "invalid_action_rate", "evidence_coverage", "wrong_remediation_rate", "premature_resolution_rate",
            "p_mit_given_diag_ok", "p_mit_given_diag_wrong", "write_share", "error_rate")
# The columns of the breakdown tables (per difficulty, layer, failure mode, noise).
BREAKDOWN = ("e2e", "diagnosis", "mitigation", "ttm_s")
SHORT = {
    "e2e": "E2E", "diagnosis": "diag", "mitigation": "mitig", "reward": "reward", "ttd_s": "TTD",
    "ttm_s": "TTM", "tokens": "tokens", "steps": "steps", "invalid_action_rate": "invalid",
    "evidence_coverage": "evidence", "wrong_remediation_rate": "wrong fix", "premature_resolution_rate": "premature",
    "p_mit_given_diag_ok": "P(m|d ok)", "p_mit_given_diag_wrong": "P(m|d wrong)", "write_share": "writes",
    "error_rate": "errors",
}


def _number(x: float, kind: str) -> str:
    if kind == "rate":
        return f"{100 * x:.0f}%"
    if kind == "seconds":
        return f"{x:.0f}s"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x / 1000:.1f}k"
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.0f}"


def fmt(est: Estimate, metric: str, *, interval: bool = True) -> str:
    """``62% [45-78]``: the estimate and its 95% interval in the metric's unit ('n/a' if none)."""
    if est.value is None:
        return "n/a"
    kind = METRIC_BY_NAME[metric].kind
    text = _number(est.value, kind)
    if interval and est.lo is not None and est.hi is not None:
        lo, hi = _number(est.lo, kind), _number(est.hi, kind)
        if lo == hi:  # an interval too narrow to show at this precision
            return text
        text += f" [{lo.rstrip('%s')}-{hi}]" if kind in ("rate", "seconds") else f" [{lo}-{hi}]"
    return text


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table (pipes in cells escaped)."""
    def cell(s: str) -> str:
        return str(s).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def metrics_table(groups: Sequence[GroupMetrics], columns: Sequence[str] = HEADLINE) -> str:
    """One row per group: its keys, run counts, then each metric with its interval."""
    if not groups:
        return "_no runs_"
    keys = list(groups[0].keys)
    header = [*keys, "runs", "not judged", *(SHORT[c] for c in columns)]
    rows = [[*g.keys.values(), str(g.runs), str(g.not_judged), *(fmt(g[c], c) for c in columns)] for g in groups]
    return markdown_table(header, rows)


def matrix_table(groups: Sequence[GroupMetrics], row_key: str, col_key: str, metric: str) -> str:
    """A pivot: ``row_key`` down, ``col_key`` across, ``metric`` (without interval) in the cells."""
    rows = sorted({g.keys[row_key] for g in groups})
    cols = sorted({g.keys[col_key] for g in groups})
    cell = {(g.keys[row_key], g.keys[col_key]): fmt(g[metric], metric, interval=False) for g in groups}
    return markdown_table([row_key, *cols], [[r, *(cell.get((r, c), "") for c in cols)] for r in rows])


def tool_mix_table(groups: Sequence[GroupMetrics], top: int = 8) -> str:
    """Per group: reads vs writes, and the most used tools and kubectl verbs."""
    rows = []
    for g in groups:
        mix = g.tool_mix
        rows.append([*g.keys.values(), str(mix.reads), str(mix.writes),
                     ", ".join(f"{k} {v}" for k, v in mix.by_tool.most_common(top)) or "-",
                     ", ".join(f"{k} {v}" for k, v in mix.by_verb.most_common(top)) or "-"])
    keys = list(groups[0].keys) if groups else ["group"]
    return markdown_table([*keys, "reads", "writes", "tools", "kubectl verbs"], rows)
