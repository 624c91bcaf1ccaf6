"""`sregym observability deploy|status`: the Prometheus, trace and log stack the agent reads."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from sregym.cli.options import ContextOpt, KubeconfigOpt

observability_cmd = typer.Typer(help="Deploy and inspect the observability stack (namespace observability).",
                                no_args_is_help=True)


def _note(message: str) -> None:
    """What the stack's functions report (a port-forward this host opened), on stderr."""
    Console(stderr=True).print(f"sregym: {message}", highlight=False, markup=False)


def _cluster(kubeconfig, context):
    from sregym.cluster.providers import current_cluster

    return current_cluster(kubeconfig, context)


@observability_cmd.command("deploy")
def deploy(kubeconfig: KubeconfigOpt = None, context: ContextOpt = None,
           timeout: float = typer.Option(300, help="Seconds to wait for every endpoint to answer.")) -> None:
    """Install or upgrade the stack (reused when it runs at the same chart hash and is ready)."""
    from sregym.apps.observability import deploy_observability, endpoints

    cluster = _cluster(kubeconfig, context)
    installed = deploy_observability(cluster, timeout=timeout, progress=_note)
    Console().print(f"observability stack {'installed' if installed else 'already up to date'}")
    _print_urls(endpoints(cluster, _note))


@observability_cmd.command("status")
def status(kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Whether every workload is ready and every endpoint answers; exit 3 when not."""
    from sregym.apps.observability import endpoints, problems

    cluster = _cluster(kubeconfig, context)
    left = problems(cluster, _note)
    _print_urls(endpoints(cluster, _note))
    console = Console()
    if left:
        for line in left:
            console.print(f"[red]not ready[/red]: {line}")
        raise typer.Exit(3)
    console.print("[green]ready[/green]")


def _print_urls(urls: dict[str, str]) -> None:
    table = Table("endpoint", "URL")
    for name, url in urls.items():
        table.add_row(name, url)
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add the `observability` command group to the sregym CLI."""
    app.add_typer(observability_cmd, name="observability")
