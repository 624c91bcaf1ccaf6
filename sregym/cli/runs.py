"""``sregym run`` (one problem, one agent, one seed) and ``sregym cleanup`` (undo crashed runs)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer
from rich.console import Console
from rich.markup import escape

from sregym.cli.options import (
    ContextOpt,
    KubeconfigOpt,
    PluginsOpt,
    ProblemsDirOpt,
    load_plugins,
    run_settings_options,
)
from sregym.core.loader import load_problem_arg
from sregym.core.settings import RunSettings

if TYPE_CHECKING:
    from sregym.core.record import AgentObject


@run_settings_options()
def run(
    problem: Annotated[str, typer.Option("--problem", "-p", help="Problem id, or a path to a problem YAML file.")],
    out: Annotated[Path, typer.Option(help="Folder for the run record <run_id>.json.")] = Path("runs"),
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    *,
    settings: RunSettings,
) -> None:
    """Run one problem with one agent: prepare, baseline, inject, agent, grade, recover, record.

    Exits 0 when a record was written (whatever the grade). Ctrl-C recovers the faults, then exits
    130. If the process is killed, `sregym cleanup` undoes what it left.
    """
    from sregym.cluster.providers import current_cluster
    from sregym.conductor.checks import check_problem
    from sregym.conductor.run import run_problem

    load_plugins(settings.plugins)
    lp = load_problem_arg(problem, problems_dir)
    check_problem(lp, noise=settings.noise)
    cluster = current_cluster(kubeconfig, context)
    console = Console(stderr=True)
    record = anyio.run(lambda: run_problem(lp.problem, settings, out_dir=out, cluster=cluster, console=console))
    mit, diag = record.grades.mitigation, record.grades.diagnosis
    console.print(f"run {record.run_id}: mitigation "
                  f"{'[green]passed[/]' if mit and mit.passed else '[red]failed[/]'}, diagnosis "
                  f"{('[green]passed[/]' if diag.passed else '[red]failed[/]') if diag and diag.judged else 'not judged'}"
                  f", {record.trajectory.steps} steps, TTM {record.ttm_s}s")
    if mit and mit.rerouted:  # why an oracle that passed did not count
        console.print("[red]the app no longer answers its own requests[/]: " + "; ".join(mit.rerouted[:3]))
    typer.echo(str(out / f"{record.run_id}.json"))


def agent_objects_summary(objects: list[AgentObject]) -> str:
    """``; removed the agent's deployments.apps/x; ...`` for a cleanup line ('' when the agent made nothing)."""
    removed = [f"{o.resource}/{o.name}" for o in objects if o.removed]
    kept = [f"{o.resource}/{o.name}" for o in objects if o.change != "created"]
    return ((f"; removed the agent's {', '.join(removed)}" if removed else "")
            + (f"; changed by the agent (not undone; the next deploy resets the release's): {', '.join(kept)}"
               if kept else ""))


def cleanup(
    force: Annotated[bool, typer.Option(help="Also clean runs whose process still seems alive.")] = False,
    plugins: PluginsOpt = [],  # noqa: B006
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
) -> None:
    """Undo faults and noise left by crashed or killed runs (from their journals), newest first,
    delete the objects those runs labelled, stop their agents and delete what those agents created.
    Safe to run any time; does nothing if all is clean."""
    from sregym.cluster.kube import Kube
    from sregym.conductor.cleanup import cleanup_all, stop_orphan_helpers, sweep_scratch
    from sregym.core.errors import FaultError

    load_plugins(plugins)
    console = Console(stderr=True)

    def kube_for(header):  # noqa: ANN001, ANN202 - the kubeconfig the run itself used, unless overridden
        if kubeconfig or context or header is None or not header.kubeconfig:
            from sregym.cluster.providers import current_cluster

            return current_cluster(kubeconfig, context).kube
        if not Path(header.kubeconfig).is_file():
            from sregym.cluster import in_cluster

            if in_cluster.pod_namespace() is not None:
                # a journal on the volume of a pod of this cluster (a killed night), whose kubeconfig
                # lived in that pod: this pod's account reaches the same API
                return Kube(in_cluster.write_kubeconfig(), None)
            return None  # that cluster is gone; only faults outside Kubernetes can still be undone
        return Kube(Path(header.kubeconfig), header.context)

    results = cleanup_all(kube_for, force=force)
    helpers, helper_errors = stop_orphan_helpers()
    if helpers:
        console.print(f"stopped {len(helpers)} helper process(es) of killed sregym processes: "
                      + escape(", ".join(helpers)))
    for error in helper_errors:
        console.print(f"[red]incomplete[/] {escape(error)}")
    swept = sweep_scratch()  # after the killed runs' helpers are stopped
    if swept:
        console.print(f"removed {len(swept)} scratch folder(s) of killed runs from {swept[0].parent}")
    if not results:
        console.print("nothing to clean: no open journal")
    failed = len(helper_errors)
    for r in results:
        if r.skipped:
            console.print(f"[yellow]skipped[/] {r.run_id}: {escape(r.skipped)}")
        elif r.errors:
            failed += 1
            console.print(f"[red]incomplete[/] {r.run_id}: recovered {len(r.recovered)}"
                          + escape(agent_objects_summary(r.agent_objects)) + "; " + escape("; ".join(r.errors)))
        else:
            console.print(f"[green]clean[/] {r.run_id}: recovered {', '.join(r.recovered) or 'nothing open'}"
                          + (f"; stopped {', '.join(r.stopped)}" if r.stopped else "")
                          + escape(agent_objects_summary(r.agent_objects)))
    if failed:
        raise FaultError(f"{failed} run(s) or helper process(es) could not be fully cleaned",
                         hint="fix the cause above and run cleanup again")


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("cleanup")(cleanup)
