"""``sregym generate``: list the viable (fault primitive, target) pairs across our apps, or write a
problem-file skeleton for one of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from sregym.cli.options import AppOpt, ChartsDirOpt, PluginsOpt, ProblemsDirOpt, catalog, load_plugins
from sregym.core.errors import UserInputError


def generate(
    list_: Annotated[bool, typer.Option("--list", help="List every viable (primitive, target) pair.")] = False,
    injector: Annotated[Optional[str], typer.Option(help="The fault primitive (a registered injector).")] = None,
    target: Annotated[Optional[str], typer.Option(help="<app>/<Kind>/<name>, e.g. hotel-reservation/Deployment/geo.")]
    = None,
    out: Annotated[Optional[Path], typer.Option(help="Write the problem skeleton here (a .yaml file or a folder).")]
    = None,
    problem_id: Annotated[Optional[str], typer.Option("--id", help="Problem id (default: from the file name or "
                                                                   "<app>_<target>_<injector>).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --list: one JSON object per pair.")] = False,
    docs: Annotated[Optional[Path], typer.Option(help="Write the problem catalogue page (docs/problems.md) here.")]
    = None,
    app: AppOpt = [],  # noqa: B006 - typer reads list defaults
    charts_dir: ChartsDirOpt = [],  # noqa: B006
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
    plugins: PluginsOpt = [],  # noqa: B006
) -> None:
    """Show the problem space beyond the curated set, start a new problem file from one pair, or
    regenerate the problem catalogue page (--docs)."""
    from sregym.conductor import generate as gen

    if docs is not None:
        from sregym.report.problem_docs import write

        Console(stderr=True).print(f"wrote {write(catalog(problems_dir, plugins), docs)}")
        return
    if not list_ and not (injector and target):
        raise UserInputError("pass --list, or --injector and --target",
                             hint="sregym generate --list | sregym generate --injector X --target APP/Kind/name --out problems/")
    apps = gen.load_apps(app, charts_dir)
    if list_:
        load_plugins(plugins)
        covered = gen.covered_pairs(lp.problem for lp in catalog(problems_dir, []).problems.values())
        pairs = gen.candidates(apps, [injector] if injector else None, covered)
        if as_json:
            for c in pairs:
                typer.echo(json.dumps({"injector": c.injector, "target": c.target.ref, "role": c.target.role,
                                       "problems": list(c.covered_by)}))
            return
        table = Table()
        for col in ("injector", "target", "role", "curated problems"):
            table.add_column(col, overflow="fold")
        for c in pairs:
            table.add_row(c.injector, c.target.ref, c.target.role, ", ".join(c.covered_by) or "[dim]-[/]")
        Console().print(table)
        done = sum(1 for c in pairs if c.covered_by)
        Console(stderr=True).print(f"[dim]{len(pairs)} viable pair(s), {done} used by curated problems[/]")
        return
    load_plugins(plugins)
    cand = gen.find_candidate(injector, target, apps)
    if out is None:
        typer.echo(gen.skeleton(cand, problem_id or gen.default_problem_id(cand)), nl=False)
        return
    path = gen.write_skeleton(cand, out, problem_id, force=force)
    Console(stderr=True).print(f"wrote {path}: fill every TODO, then `sregym validate --static {path}`")


def register(app: typer.Typer) -> None:
    app.command("generate")(generate)
