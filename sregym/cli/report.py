"""`sregym report`, `sregym leaderboard build` and `sregym suite run`: parse, call the library, print."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from sregym.cli.options import (
    ContextOpt,
    KubeconfigOpt,
    Noise,
    NoiseOpt,
    ProblemsDirOpt,
    run_settings_options,
)
from sregym.core.errors import UserInputError
from sregym.core.settings import RunSettings
from sregym.report.bootstrap import DEFAULT_RESAMPLES

class Executor(str, Enum):
    threads = "threads"
    jobs = "jobs"


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
    table = Table(title="95% bootstrap intervals")
    table.add_column("agent", no_wrap=True)  # intervals may wrap in a narrow terminal; names must not
    for name in ("runs", "not judged", *(SHORT[c] for c in columns)):
        table.add_column(name, overflow="fold")
    for g in files.analysis.agents:
        table.add_row(g.keys["agent"], str(g.runs), str(g.not_judged), *(fmt(g[c], c) for c in columns))
    Console().print(table)
    # paths unwrapped, one per line, so scripts can read them
    typer.echo(f"report: {files.markdown}\nmetrics: {files.metrics_json}\nfigures: {files.markdown.parent / 'figures'}")


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
    typer.echo(f"leaderboard: {index}")


suite_app = typer.Typer(help="Run a suite of problems over several seeds.", no_args_is_help=True)


@suite_app.command("run")
@run_settings_options(leave_out=("seed", "noise"))
def suite_run(
    suite: Annotated[str, typer.Option(help="suite name: problems/suites/<name>.yaml")],
    out: Annotated[Path, typer.Option(help="results directory (records and index.jsonl)")],
    seeds: Annotated[Optional[int], typer.Option(min=1, help="seeds 0..N-1 (default: the suite's)")] = None,
    noise: NoiseOpt = Noise.on,
    resume: Annotated[bool, typer.Option(help="run only the cells OUT has no finished record of")] = False,
    retry_errors: Annotated[bool, typer.Option(help="with --resume, also rerun cells that ended in an error")] = False,
    parallel: Annotated[int, typer.Option(min=1, help="cells side by side when their faults do not conflict")] = 1,
    max_consecutive_errors: Annotated[int, typer.Option(min=1, help="stop after this many failed runs in a row")] = 3,
    executor: Annotated[Executor, typer.Option(help="threads: cells run in this process; jobs: each cell runs as "
                                                    "a Kubernetes Job (docs/lab.md)")] = Executor.threads,
    job_pod: Annotated[Optional[Path], typer.Option(help="with --executor jobs: YAML of the cells' Jobs (namespace, "
                                                         "image, service_account, results_claim, ...)")] = None,
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    *,
    settings: RunSettings,
) -> None:
    """Run every (problem, seed, noise) cell of a suite with one agent; resumable after a kill."""
    from sregym.cli.options import catalog, load_plugins
    from sregym.cluster.providers import current_cluster
    from sregym.conductor.checks import check_problem
    from sregym.conductor.node_leases import NodeLeases
    from sregym.conductor.suite import SuiteRunner

    if job_pod is not None and executor is not Executor.jobs:
        raise UserInputError("--job-pod goes with --executor jobs")
    cat = catalog(problems_dir, settings.plugins)
    given_plugins = settings.plugins
    settings = settings.over(cat.suite(suite).suite.settings)
    load_plugins([p for p in settings.plugins if p not in given_plugins])  # the suite file's own
    if "agent" not in settings.model_fields_set:
        raise UserInputError("which agent? pass --agent NAME (or set agent: in the --settings file or the suite's "
                             "settings:)")
    from sregym.conductor.agent import agent_class

    agent_class(settings.agent)  # an unknown agent is refused here, before the cluster or any Job is touched
    loaded = cat.suite_problems(suite)
    noise_settings = {"on": [True], "off": [False], "both": [True, False]}[noise.value]
    for lp in loaded:
        check_problem(lp, noise=True in noise_settings)
    if retry_errors and not resume:
        raise UserInputError("--retry-errors goes with --resume")
    run_fn = None
    if executor is Executor.jobs:
        from sregym.conductor.suite_jobs import JobCellRunner, load_job_pod

        run_fn = JobCellRunner(load_job_pod(job_pod), problems_dirs=problems_dir,
                               console=Console(stderr=True).print)
    n_seeds = seeds or cat.suite(suite).suite.seeds
    cluster = current_cluster(kubeconfig, context)
    runner = SuiteRunner(
        [lp.problem for lp in loaded], suite=suite, settings=settings, seeds=range(n_seeds), noise=noise_settings,
        out_dir=out, cluster=cluster, run_fn=run_fn, parallel=parallel, retry_errors=retry_errors,
        max_consecutive_errors=max_consecutive_errors, leases=NodeLeases(cluster.kube))
    summary = runner.run(resume=resume)
    done = ", ".join(f"{n} {s}" for s, n in sorted(summary.statuses.items())) or "nothing to run"
    Console(stderr=True).print(f"suite {suite} / {settings.agent}: {done}; {summary.skipped} already finished; "
                               f"{summary.seconds / 60:.1f} min")
    typer.echo(str(out))


@suite_app.command("cell", hidden=True)
@run_settings_options()
def suite_cell(
    suite: Annotated[str, typer.Option(help="the suite the cell belongs to")],
    problem: Annotated[str, typer.Option("--problem", "-p", help="problem id")],
    namespace: Annotated[str, typer.Option(help="the slot namespace the suite chose for the cell's app")],
    out: Annotated[Path, typer.Option(help="the suite's results directory")],
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    *,
    settings: RunSettings,
) -> None:
    """One cell of a suite, as the pod of its Job runs it (`suite run --executor jobs` creates it)."""
    from sregym.cli.options import load_plugins
    from sregym.cluster.providers import current_cluster
    from sregym.conductor.checks import check_problem
    from sregym.conductor.suite_jobs import run_cell
    from sregym.core.loader import load_problem_arg

    load_plugins(settings.plugins)
    lp = load_problem_arg(problem, problems_dir)
    check_problem(lp, noise=settings.noise)
    summary = run_cell(lp.problem, settings, namespace=namespace, suite=suite, out_dir=out,
                       cluster=current_cluster(kubeconfig, context), console=Console(stderr=True))
    if summary.statuses.get("completed", 0) != 1:
        raise typer.Exit(1)


@suite_app.command("clean-cells")
def suite_clean_cells(
    results: Annotated[list[Path], typer.Argument(help="results directories of earlier `--executor jobs` suites",
                                                  exists=True, file_okay=False)],
    job_pod: Annotated[Optional[Path], typer.Option(help="YAML of the cells' Jobs (their namespace)")] = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Undo what lost cells of earlier suites left: for each RESULTS folder, wait for its cells' Jobs
    still running, then undo every open cell journal (what `suite run --executor jobs --resume` does
    for its own folder). The nightly chart runs it over every night's folder before the night."""
    from sregym.cluster.providers import current_cluster
    from sregym.conductor.suite_jobs import JobCellRunner, load_job_pod
    from sregym.core.errors import ClusterError

    runner = JobCellRunner(load_job_pod(job_pod), console=Console(stderr=True).print)
    kube = current_cluster(kubeconfig, context).kube
    errors = [e for folder in results for e in runner.clean_orphans(kube, folder)]
    if errors:
        raise ClusterError("undoing what lost cells left failed: " + "; ".join(errors),
                           hint="fix the cause and run it again")
    typer.echo(f"lost cells cleaned in {len(results)} results folder(s)")


def register(app: typer.Typer) -> None:
    """Add the reporting and suite commands to the `sregym` CLI."""
    app.command("report")(report)
    app.add_typer(leaderboard_app, name="leaderboard")
    app.add_typer(suite_app, name="suite")
