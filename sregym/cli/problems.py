"""``sregym list``, ``show``, ``schema`` and ``validate``: browse and check problems."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Optional

import anyio
import typer
from rich import box
from rich.console import Console
from rich.table import Table

from sregym.cli.options import (
    AppOpt,
    ChartsDirOpt,
    ContextOpt,
    DifficultyOpt,
    GradeWindowOpt,
    KubeconfigOpt,
    PluginsOpt,
    ProblemsDirOpt,
    SplitOpt,
    TagOpt,
    VerifyTimeoutOpt,
    catalog,
    load_plugins,
)
from sregym.core.errors import UserInputError
from sregym.core.loader import LoadedProblem, load_problem_arg


def list_problems(
    tag: TagOpt = [],  # noqa: B006 - typer reads list defaults
    difficulty: DifficultyOpt = [],  # noqa: B006
    app: AppOpt = [],  # noqa: B006
    split: SplitOpt = [],  # noqa: B006
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per problem instead of a table.")] = False,
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
    plugins: PluginsOpt = [],  # noqa: B006
) -> None:
    """List problems, filtered by tag, difficulty, app and split."""
    chosen = catalog(problems_dir, plugins).select(tags=tag, difficulty=difficulty, app=app, split=split)
    if as_json:
        for lp in chosen:
            p = lp.problem
            typer.echo(json.dumps({"id": p.id, "title": p.title, "app": p.app.name, "difficulty": p.difficulty.value,
                                   "split": p.split.value, "tags": p.tags.all(), "path": str(lp.path)}))
        return
    console = Console()
    # ids never wrap or shorten (they are what users copy); other columns come as the width allows
    width = console.width
    columns = {"app": width >= 110, "difficulty": True, "split": width >= 110, "layer": True,
               "family": width >= 150, "failure mode": True, "title": width >= 150}
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("id", no_wrap=True, min_width=max((len(lp.id) for lp in chosen), default=2))
    for name, shown in columns.items():
        if shown:
            table.add_column(name, ratio=1 if name == "title" else None, no_wrap=name != "title",
                             overflow="ellipsis")
    for lp in chosen:
        p = lp.problem
        cells = {"app": p.app.name, "difficulty": p.difficulty.value, "split": p.split.value,
                 "layer": p.tags.layer.value, "family": p.tags.fault_family, "failure mode": p.tags.failure_mode,
                 "title": p.title}
        table.add_row(p.id, *(cells[name] for name, shown in columns.items() if shown))
    console.print(table)
    hint = "" if columns["title"] else "; a wider terminal shows more columns, `sregym show ID` everything"
    Console(stderr=True).print(f"[dim]{len(chosen)} problem(s){hint}[/]")


def public_view(lp: LoadedProblem) -> dict:
    """What ``show`` prints without ``--reveal``: no ground truth, no fault details."""
    p = lp.problem
    return {"id": p.id, "title": p.title, "alert": p.alert, "app": p.app.model_dump(exclude_defaults=True),
            "difficulty": p.difficulty.value, "split": p.split.value, "tags": p.tags.model_dump(mode="json"),
            "faults": len(p.faults), "noise": p.noise.model_dump(), "budgets": p.budgets.model_dump(),
            "oracles": {"diagnosis": p.oracles.diagnosis.name, "mitigation": [o.name for o in p.oracles.mitigation]},
            "no_op": p.no_op, "file": str(lp.path), "spec_hash": p.spec_hash()}


def show(
    problem: Annotated[str, typer.Argument(help="Problem id, or a path to a problem YAML file.")],
    reveal: Annotated[bool, typer.Option("--reveal", help="Also print faults and ground truth (spoilers).")] = False,
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
    plugins: PluginsOpt = [],  # noqa: B006
) -> None:
    """Show one problem. Ground truth and fault details stay hidden unless --reveal."""
    load_plugins(plugins)
    lp = load_problem_arg(problem, problems_dir)
    data = lp.problem.model_dump(mode="json") | {"file": str(lp.path), "spec_hash": lp.problem.spec_hash()} \
        if reveal else public_view(lp)
    Console().print_json(json.dumps(data))


SCHEMAS = {
    "problem": "sregym.core.problem:Problem",
    "suite": "sregym.core.problem:Suite",
    "run-record": "sregym.core.record:RunRecord",
    "trajectory": "sregym.core.trajectory:Trajectory",
    "run-settings": "sregym.core.settings:RunSettings",
}


def schema(
    out: Annotated[Optional[Path], typer.Option(help="Write <name>.schema.json files into this folder "
                                                     "instead of printing one JSON object.")] = None,
) -> None:
    """JSON Schema of the problem, suite, run record, trajectory and run settings (`run --settings`) formats."""
    import importlib

    schemas = {}
    for name, ref in SCHEMAS.items():
        module, cls = ref.split(":")
        schemas[name] = getattr(importlib.import_module(module), cls).model_json_schema()
    if out is None:
        typer.echo(json.dumps(schemas, indent=2))
        return
    out.mkdir(parents=True, exist_ok=True)
    for name, s in schemas.items():
        (out / f"{name}.schema.json").write_text(json.dumps(s, indent=2) + "\n")
    Console(stderr=True).print(f"wrote {len(schemas)} schemas to {out}")


def validate(
    problem: Annotated[Optional[str], typer.Argument(help="Problem id or YAML path; omit with --all.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every problem that matches the filters.")] = False,
    static: Annotated[bool, typer.Option("--static", help="Schema, registry and chart checks only (every workload, "
                                         "container and field a problem names is in its app's rendered chart); "
                                         "needs no cluster.")]
    = False,
    tag: TagOpt = [],  # noqa: B006
    difficulty: DifficultyOpt = [],  # noqa: B006
    app: AppOpt = [],  # noqa: B006
    split: SplitOpt = [],  # noqa: B006
    grade_window: GradeWindowOpt = 10.0,
    verify_timeout: VerifyTimeoutOpt = 90.0,
    charts_dir: ChartsDirOpt = [],  # noqa: B006
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
    plugins: PluginsOpt = [],  # noqa: B006
    log: Annotated[Optional[Path], typer.Option(
        "--log", help="Append one JSON line per problem as it finishes (result, steps, wall time).")] = None,
    resume: Annotated[bool, typer.Option(
        "--resume", help="Skip the problems and seeds --log already records as valid (continue an "
                         "interrupted --all).")] = False,
    noise: Annotated[bool, typer.Option(
        "--noise/--no-noise", help="Play each problem's seeded noise while the faulty system is graded "
                                   "(and for a window on no-op controls), as runs are played.")] = True,
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="Validate each problem with run seeds 0..N-1 "
                                                              "(each seed gives another noise schedule).")] = 2,
    report: Annotated[Optional[list[Path]], typer.Option(
        "--report", help="Print the markdown table of these --log files instead of validating "
                         "(how docs/validation.md is made).")] = None,
    into: Annotated[Optional[Path], typer.Option(
        "--into", help="With --report: rewrite the generated block of this markdown file instead of printing.")]
    = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Prove problems: healthy baseline, inject, fault observable and mitigation oracle fails
    (with the problem's noise playing), recover, oracle passes, app healthy again; for every seed.
    With --static, only the file, registry and chart checks; with --report, the table of earlier --log
    files. Each result is printed as it finishes; the table at the end sums them up."""
    from sregym.conductor.checks import check_problem
    from sregym.conductor.validate_all import runs_to_validate

    if report:
        _report(report, into)
        return
    if into is not None:
        raise UserInputError("--into goes with --report", hint="sregym validate --report validate.jsonl "
                                                               "--into docs/validation.md")
    if not problem and not all_:
        raise UserInputError("name a problem, or pass --all", hint="sregym validate PROBLEM | sregym validate --all")
    if problem and all_:
        raise UserInputError("name a problem or pass --all, not both")
    if problem:
        load_plugins(plugins)
        chosen = [load_problem_arg(problem, problems_dir)]
    else:
        chosen = catalog(problems_dir, plugins).select(tags=tag, difficulty=difficulty, app=app, split=split)
    console = Console()
    for lp in chosen:
        check_problem(lp, noise=True)
    runs = runs_to_validate(chosen, seeds, log=log, resume=resume, noise=noise, console=console)
    chosen = [lp for lp in chosen if any(r[0] is lp for r in runs)]
    if static:
        from sregym.conductor.chart_checks import check_against_charts

        check_against_charts(chosen, charts_dir)
        for lp in chosen:
            console.print(f"[green]ok[/] {lp.id} [dim]{lp.path}[/]")
        console.print(f"{len(chosen)} problem(s) pass the static checks")
        return
    from sregym.apps import app_driver
    from sregym.cluster.providers import current_cluster
    from sregym.conductor.validate_all import validate_all

    failed = anyio.run(functools.partial(
        validate_all, runs, cluster=current_cluster(kubeconfig, context), driver=app_driver(charts_dir),
        grade_window=grade_window, verify_timeout=verify_timeout, console=console, log=log, noise=noise))
    if failed:
        raise typer.Exit(5)


def _report(logs: list[Path], into: Path | None) -> None:
    from sregym.report.docblock import write_block
    from sregym.report.validation import BLOCK, HEADING, validation_markdown

    missing = [str(p) for p in logs if not p.is_file()]
    if missing:
        raise UserInputError(f"--report: no such log file: {', '.join(missing)}",
                             hint="pass the file(s) an earlier `sregym validate --log FILE` wrote")
    text = validation_markdown(logs)
    if into is None:
        typer.echo(text, nl=False)
        return
    write_block(into, BLOCK, text, heading=HEADING)
    Console(stderr=True).print(f"wrote the generated block of {into}")


def register(app: typer.Typer) -> None:
    app.command("list")(list_problems)
    app.command("show")(show)
    app.command("schema")(schema)
    app.command("validate")(validate)
