"""`sregym report`, `sregym leaderboard build` and `sregym suite run`: parse, call the library, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from sregym.report.bootstrap import DEFAULT_RESAMPLES

SeedOpt = Annotated[int, typer.Option("--bootstrap-seed", help="seed of the bootstrap resampling")]
ResamplesOpt = Annotated[int, typer.Option(help="bootstrap resamples per estimate", min=100)]


def report(
    results: Annotated[list[Path], typer.Argument(help="results directories (or record files)")],
    out: Annotated[Optional[Path], typer.Option(help="where to write (default: <first RESULTS>/report)")] = None,
    bootstrap_seed: SeedOpt = 0,
    resamples: ResamplesOpt = DEFAULT_RESAMPLES,
) -> None:
    """Tables (markdown) and figures (PNG, SVG) of every run record under RESULTS."""
    from sregym.report.build import build_report

    from sregym.report.tables import SHORT, fmt

    files = build_report(results, out, seed=bootstrap_seed, resamples=resamples)
    columns = ("e2e", "diagnosis", "mitigation", "reward", "ttm_s", "tokens", "error_rate")
    table = Table("agent", "runs", "not judged", *(SHORT[c] for c in columns), title="95% bootstrap intervals")
    for g in files.analysis.agents:
        table.add_row(g.keys["agent"], str(g.runs), str(g.not_judged), *(fmt(g[c], c) for c in columns))
    console = Console()
    console.print(table)
    console.print(f"report: {files.markdown}\nmetrics: {files.metrics_json}\nfigures: {files.markdown.parent / 'figures'}")


leaderboard_app = typer.Typer(help="Static HTML leaderboard from run records.", no_args_is_help=True)


@leaderboard_app.command("build")
def leaderboard_build(
    results: Annotated[list[Path], typer.Argument(help="results directories of suite runs")],
    out: Annotated[Path, typer.Option(help="folder to write the site into")],
    bootstrap_seed: SeedOpt = 0,
    resamples: ResamplesOpt = DEFAULT_RESAMPLES,
) -> None:
    """One page per agent and per problem, a sortable table and the figures; oracle runs excluded."""
    from sregym.report.site import build_leaderboard

    index = build_leaderboard(results, out, seed=bootstrap_seed, resamples=resamples)
    Console().print(f"leaderboard: {index}")


def register(app: typer.Typer) -> None:
    """Add the reporting commands to the `sregym` CLI."""
    app.command("report")(report)
    app.add_typer(leaderboard_app, name="leaderboard")
