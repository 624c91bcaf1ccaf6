"""``sregym report``: from results directories to a markdown report, metrics.json and figures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from sregym.core.errors import UserInputError
from sregym.core.record import RunRecord
from sregym.report import plots
from sregym.report.bootstrap import DEFAULT_RESAMPLES
from sregym.report.metrics import METRIC_BY_NAME, GroupMetrics, aggregate, facts_of
from sregym.report.records import load_records
from sregym.report.tables import BREAKDOWN, matrix_table, metrics_table, tool_mix_table

BREAKDOWNS = ("difficulty", "layer", "failure_mode", "noise")


@dataclass
class Analysis:
    """Everything computed from one set of records, shared by the report and the leaderboard."""

    records: list[RunRecord]
    agents: list[GroupMetrics]
    problem_cells: list[GroupMetrics]
    breakdowns: dict[str, list[GroupMetrics]]

    def as_dict(self) -> dict:
        return {
            "runs": len(self.records),
            "agents": [g.as_dict() for g in self.agents],
            "problems": [g.as_dict() for g in self.problem_cells],
            "breakdowns": {k: [g.as_dict() for g in v] for k, v in self.breakdowns.items()},
        }


def analyse(records: Sequence[RunRecord], *, seed: int = 0, resamples: int = DEFAULT_RESAMPLES) -> Analysis:
    """Aggregate per agent, per (problem, agent), and per agent within each breakdown key."""
    facts = facts_of(records)
    kw = {"seed": seed, "resamples": resamples}
    return Analysis(
        records=list(records),
        agents=aggregate(facts, ["agent"], **kw),
        problem_cells=aggregate(facts, ["problem", "agent"], **kw),
        breakdowns={k: aggregate(facts, ["agent", k], **kw) for k in BREAKDOWNS},
    )


@dataclass
class ReportFiles:
    markdown: Path
    metrics_json: Path
    figures: list[Path]
    analysis: Analysis


def _markdown(a: Analysis, sources: Sequence[Path], figure_dir: str) -> str:
    unranked = sorted({r.agent.name for r in a.records if not r.agent.leaderboard or r.agent.kind == "oracle"})
    versions = sorted({r.versions.sregym for r in a.records})
    suites = sorted({r.suite or "-" for r in a.records})
    lines = [
        "# sregym report",
        "",
        f"{len(a.records)} runs of {len({r.problem_id for r in a.records})} problems by {len(a.agents)} agents; "
        f"suites: {', '.join(suites)}; sregym {', '.join(versions)}; "
        f"built {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from {', '.join(map(str, sources))}.",
        "",
        "Cells show the estimate and its 95% hierarchical bootstrap interval (problems, then seeds). "
        "Diagnoses that were not judged are left out of the diagnosis and end-to-end rates. "
        "Runs the framework could not finish count only in `errors`. See docs/reporting.md.",
    ]
    if unranked:
        lines += ["", f"Reference agents (upper bounds, never ranked): {', '.join(unranked)}."]
    lines += ["", "## Agents", "", metrics_table(a.agents)]
    for key in BREAKDOWNS:
        lines += ["", f"## By {key.replace('_', ' ')}", "", metrics_table(a.breakdowns[key], BREAKDOWN)]
    shown = plots.shown_success(a.problem_cells)
    lines += ["", f"## {METRIC_BY_NAME[shown].label.capitalize()} per problem", "",
              matrix_table(a.problem_cells, "problem", "agent", shown)]
    lines += ["", "## Tool calls", "", tool_mix_table(a.agents)]
    lines += ["", "## Figures", ""]
    lines += [f"![{name}]({figure_dir}/{name}.png)" for name in plots.FIGURES]
    return "\n".join(lines) + "\n"


def build_report(inputs: Sequence[Path | str], out: Path | str | None = None, *, seed: int = 0,
                 resamples: int = DEFAULT_RESAMPLES) -> ReportFiles:
    """Read every record under ``inputs`` and write ``report.md``, ``metrics.json`` and
    ``figures/*.png|svg`` into ``out`` (default: ``<first input>/report``)."""
    sources = [Path(p) for p in inputs]
    if not sources:
        raise UserInputError("no results directory given", hint="sregym report RESULTS_DIR")
    records = load_records(sources)
    if not records:
        raise UserInputError(f"no run records found under {', '.join(map(str, sources))}",
                             hint="point at the --out directory of `sregym run` or `sregym suite run`")
    out_dir = Path(out) if out else (sources[0] if sources[0].is_dir() else sources[0].parent) / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    analysis = analyse(records, seed=seed, resamples=resamples)
    names = plots.all_figures(analysis.agents, analysis.problem_cells, out_dir / "figures")
    md = out_dir / "report.md"
    md.write_text(_markdown(analysis, sources, "figures"))
    mj = out_dir / "metrics.json"
    mj.write_text(json.dumps(analysis.as_dict(), indent=1))
    return ReportFiles(md, mj, [out_dir / "figures" / f"{n}.png" for n in names], analysis)
