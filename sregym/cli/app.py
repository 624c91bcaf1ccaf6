"""`sregym app deploy|status|delete|list|slos APP`: our apps' Helm releases and their SLOs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
import yaml
from rich.console import Console
from rich.table import Table

from sregym.cli.options import ContextOpt, KubeconfigOpt

app_cmd = typer.Typer(help="Deploy, inspect and delete the benchmark's applications.", no_args_is_help=True)
NamespaceOpt = Annotated[Optional[str], typer.Option("--namespace", "-n", help="Default: the app's own namespace.")]
AppArg = Annotated[str, typer.Argument(help="App name: a folder of charts/ (see `sregym app list`).")]


def _set_values(pairs: list[str], values_file: Path | None) -> dict:
    """Helm-style overrides: a YAML file, then --set a.b=c pairs (values parsed as YAML scalars)."""
    from sregym.apps.driver import set_path
    from sregym.core.errors import UserInputError

    values = {}
    if values_file:
        try:
            values = yaml.safe_load(values_file.read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise UserInputError(f"--values {values_file}: {e}") from None
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UserInputError(f"--set {pair!r}: expected key.path=value")
        set_path(values, key, yaml.safe_load(raw) if raw else "")
    return values


@app_cmd.command("deploy")
def deploy(name: AppArg, namespace: NamespaceOpt = None,
           set_: Annotated[list[str], typer.Option("--set", help="Value override a.b=c (repeatable).")] = [],  # noqa: B006
           values: Annotated[Optional[Path], typer.Option("--values", "-f", help="YAML file of value overrides.")] = None,
           timeout: Annotated[float, typer.Option(help="Seconds to wait for every pod to be Ready.")] = 600,
           kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Install APP and wait until Ready, or reuse it when healthy at the same chart hash."""
    from sregym.apps import deploy as deploy_app
    from sregym.apps import load_app
    from sregym.cluster.providers import current_cluster

    spec, overrides = load_app(name), _set_values(set_, values)
    result = deploy_app(current_cluster(kubeconfig, context), spec, namespace, overrides, timeout=timeout)
    verb = "reused" if result.reused else "deployed"
    Console().print(f"{verb} {result.name} in namespace {result.namespace} (chart hash {result.chart_hash}) "
                    f"in {result.seconds:.1f}s")
    if result.drift_reset:
        Console().print(f"put back what differed from the chart: {', '.join(result.drift_reset)}")


@app_cmd.command("status")
def status(name: AppArg, namespace: NamespaceOpt = None, kubeconfig: KubeconfigOpt = None,
           context: ContextOpt = None) -> None:
    """The release, workloads and pods of APP; exit 3 when it is not ready."""
    from sregym.apps import load_app
    from sregym.apps import status as app_status
    from sregym.cluster.providers import current_cluster

    spec = load_app(name)
    current = app_status(current_cluster(kubeconfig, context), spec, namespace)
    console = Console()
    console.print(f"{current.name} in {current.namespace}: release {current.release or 'not installed'}, "
                  f"chart hash {current.chart_hash or '-'}, {'READY' if current.ready else 'NOT READY'}")
    table = Table("workload", "ready")
    for w in current.workloads:
        table.add_row(f"{w.kind}/{w.name}", f"{w.ready}/{w.desired}")
    if current.workloads:
        console.print(table)
    for problem in current.problems:
        console.print(f"  [red]{problem}[/red]")
    if not current.ready:
        raise typer.Exit(3)


@app_cmd.command("delete")
def delete(name: AppArg, namespace: NamespaceOpt = None,
           purge_data: Annotated[bool, typer.Option(help="Also remove the stores' data on this host.")] = False,
           kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Uninstall APP and remove its namespace."""
    from sregym.apps import delete as delete_app
    from sregym.apps import load_app
    from sregym.cluster.providers import current_cluster

    spec = load_app(name)
    existed = delete_app(current_cluster(kubeconfig, context), spec, namespace, purge_data=purge_data)
    Console().print(f"{'deleted' if existed else 'nothing to delete for'} {name} in {namespace or spec.namespace}")


@app_cmd.command("list")
def list_apps() -> None:
    """Every app chart, its namespace, services and SLOs."""
    from sregym.apps import list_apps as names
    from sregym.apps import load_app

    table = Table("app", "namespace", "services", "data stores", "SLOs")
    for n in names():
        spec = load_app(n)
        table.add_row(n, spec.namespace, ", ".join(s.name for s in spec.services) or "-",
                      ", ".join(f"{d.name} ({d.engine})" for d in spec.datastores) or "-",
                      ", ".join(f"{s.name} {'>=' if s.higher_is_better else '<='} {s.objective:g}" for s in spec.slos) or "-")
    Console().print(table)


@app_cmd.command("slos")
def slos(name: AppArg, prometheus: Annotated[str, typer.Option(help="Prometheus base URL.")],
         namespace: NamespaceOpt = None,
         window: Annotated[float, typer.Option(help="Seconds measured, ending now.")] = 60) -> None:
    """Measure APP's SLOs now; exit 3 when one is missed."""
    from sregym.apps import measure_slos

    measured = measure_slos(prometheus, name, namespace, window)
    table = Table("SLO", "value", "objective", "met")
    for slo_name, m in measured.items():
        table.add_row(slo_name, "no data" if m["value"] is None else f"{m['value']:.4g}", f"{m['objective']:g}",
                      "yes" if m["met"] else "[red]no[/red]")
    Console().print(table)
    if not all(m["met"] for m in measured.values()):
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    """Add the `app` command group to the sregym CLI."""
    app.add_typer(app_cmd, name="app")
