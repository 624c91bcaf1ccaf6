"""`sregym doctor`: per node, which capabilities exist and which mechanisms each primitive can use."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from sregym.cluster.capabilities import CAPABILITIES, CapabilityCache
from sregym.cluster.kube import Kube
from sregym.cluster.local.paths import LocalPaths
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.injectors.support import mechanism_support


def _kubeconfig(cluster: str, kubeconfig: Path | None) -> Path | None:
    if kubeconfig:
        return kubeconfig
    local = LocalPaths(cluster).admin_kubeconfig
    if local.is_file():
        return local
    return Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None


def doctor(
    cluster: Annotated[str, typer.Option(help="local cluster name (its admin kubeconfig is used)")] = "default",
    kubeconfig: Annotated[Optional[Path], typer.Option(help="any kubeconfig instead of a local cluster's")] = None,
    context: Annotated[Optional[str], typer.Option(help="kubeconfig context")] = None,
    node: Annotated[Optional[str], typer.Option(help="probe only this node")] = None,
) -> None:
    """Probe every node: fault mechanisms its kernel and tools support, and what each primitive can use."""
    console = Console()
    kube = Kube(_kubeconfig(cluster, kubeconfig), context)
    kube.server_version()  # one clear ClusterError if unreachable
    nodes = [node] if node else [n.metadata.name for n in kube.core.list_node().items]
    cache = CapabilityCache(kube, HIDDEN_NAMESPACE)
    for name in nodes:
        caps = cache.get(name)
        table = Table(title=f"node {name}: capabilities")
        table.add_column("capability")
        table.add_column("present")
        table.add_column("detail")
        for cap in CAPABILITIES:
            ok = caps.present.get(cap, False)
            table.add_row(cap, "[green]yes[/]" if ok else "[red]no[/]", caps.details.get(cap, "not probed"))
        console.print(table)
        prims = Table(title=f"node {name}: primitives and mechanisms (* = used by default)")
        prims.add_column("primitive")
        prims.add_column("mechanism")
        prims.add_column("runs here")
        for row in mechanism_support(caps.present):
            mark = "[green]yes[/]" + (" *" if row.chosen else "") if row.usable else \
                f"[red]no[/] (needs {', '.join(row.missing)})"
            prims.add_row(row.injector, row.mechanism, mark)
        console.print(prims)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
