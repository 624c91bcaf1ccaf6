"""`sregym cluster up|down|status|logs`: obtain, inspect and release a cluster."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from sregym.cluster import providers

cluster_app = typer.Typer(help="Start, stop and inspect the Kubernetes cluster sregym runs on.", no_args_is_help=True)
console = Console(stderr=True)

ProviderOpt = Annotated[Optional[str], typer.Option(
    "--provider", help="local (host processes, no Docker; default), kind (needs Docker), or existing "
                       "(default when --context/--kubeconfig is given).")]
NameOpt = Annotated[str, typer.Option("--name", help="Cluster name: one data directory per name "
                                                     "(/var/lib/sregym/clusters/NAME).")]
KubeconfigOpt = Annotated[Optional[Path], typer.Option("--kubeconfig", help="Kubeconfig of an existing cluster.")]
ContextOpt = Annotated[Optional[str], typer.Option("--context", help="Context of an existing cluster.")]


def _progress():
    status = console.status("starting")
    start = time.monotonic()

    def report(msg: str) -> None:
        console.log(f"[dim]{time.monotonic() - start:6.1f}s[/] {msg}")
        status.update(msg)

    return status, report


@cluster_app.command()
def up(provider: ProviderOpt = None, name: NameOpt = "default", kubeconfig: KubeconfigOpt = None,
       context: ContextOpt = None) -> None:
    """Bring a cluster up (idempotent) and make it the one later commands use.

    local: builds upstream Kubernetes from its Go modules on first use (cached under
    /var/cache/sregym), then runs etcd, the control plane, containerd, the kubelet, kube-proxy
    and CoreDNS as host processes. Needs root."""
    p = providers.get_provider(provider, name=name, kubeconfig=kubeconfig, context=context)
    status, report = _progress()
    with status:
        handle = p.up(report)
    providers.remember(handle)
    console.print(f"[green]cluster {handle.name!r} ({handle.provider}) is up[/]; kubeconfig: {handle.kubeconfig}")


@cluster_app.command()
def down(provider: ProviderOpt = None, name: NameOpt = "default",
         purge: Annotated[bool, typer.Option("--purge", help="Also delete the data directory (etcd, "
                                                             "certificates, images).")] = False) -> None:
    """Stop every component by PID and remove the mounts, network namespaces, bridge, veths and
    iptables chains the cluster created. Data is kept for the next `up` unless --purge."""
    p = providers.get_provider(provider, name=name)
    status, report = _progress()
    with status:
        removed = p.down(report, purge=purge)
    providers.forget(p.handle())
    console.print(f"[green]cluster {name!r} is down[/] ({len(removed)} items stopped or removed)")


@cluster_app.command()
def status(provider: ProviderOpt = None, name: NameOpt = "default", kubeconfig: KubeconfigOpt = None,
           context: ContextOpt = None) -> None:
    """Show each component's state (exit 3 if the cluster is not fully up)."""
    p = providers.get_provider(provider, name=name, kubeconfig=kubeconfig, context=context)
    table = Table("component", "state", title=f"cluster {p.name} ({p.provider})")
    state = p.status()
    for comp, value in state.items():
        ok = value.startswith(("running", "Ready")) or comp == "api"
        table.add_row(comp, f"[{'green' if ok else 'red'}]{value}[/]")
    Console().print(table)
    if not all(v.startswith(("running", "Ready")) or k == "api" for k, v in state.items()):
        raise typer.Exit(3)


@cluster_app.command()
def logs(component: Annotated[str, typer.Argument(help="containerd, etcd, kube-apiserver, kube-controller-manager, "
                                                       "kube-scheduler, kubelet or kube-proxy")],
         name: NameOpt = "default",
         lines: Annotated[int, typer.Option("-n", "--lines", help="How many lines from the end.")] = 100,
         follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new lines.")] = False) -> None:
    """Print a local cluster component's log."""
    from sregym.cluster.local.provider import LocalCluster

    path = LocalCluster(name).log_path(component)
    subprocess.run(["tail", f"-n{lines}", *(["-F"] if follow else []), str(path)], check=False)


def register(app: typer.Typer) -> None:
    app.add_typer(cluster_app, name="cluster")
