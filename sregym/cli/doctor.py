"""`sregym doctor`: per node, which capabilities exist and which mechanisms each primitive can use."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from sregym.cluster.capabilities import CAPABILITIES, CapabilityCache
from sregym.cli.options import ContextOpt, KubeconfigOpt
from sregym.cluster.providers import current_cluster
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.errors import SregymError
from sregym.injectors import mechanism_support


def doctor(
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    node: Annotated[Optional[str], typer.Option(help="probe only this node")] = None,
) -> None:
    """Probe every node: fault mechanisms its kernel and tools support, and what each primitive can use."""
    console = Console()
    kube = current_cluster(kubeconfig, context).kube
    kube.server_version()  # one clear ClusterError if unreachable
    nodes = [node] if node else [n.metadata.name for n in kube.core.list_node().items]
    cache = CapabilityCache(kube, HIDDEN_NAMESPACE)
    for name in nodes:
        try:
            caps = cache.get(name)
        except SregymError as e:  # one unreachable node must not hide the others
            console.print(f"[red]node {name}: probe failed:[/] {e}")
            continue
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
