"""`sregym images build|list`: build the repository's images offline and load them into a cluster."""

from __future__ import annotations

import time
from typing import Optional

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

images_app = typer.Typer(help="Build images offline (debootstrap + podman) and load them into a cluster.",
                         no_args_is_help=True)


@images_app.command("build")
def build(
    only: Optional[list[str]] = typer.Option(None, "--only", help="Build only this image (and its parents); repeatable."),
    load: bool = typer.Option(True, "--load/--no-load", help="Import into the cluster's container runtime."),
    without_binaries: bool = typer.Option(
        False, "--without-binaries",
        help="Leave out the images that take a Go binary sregym builds (kubectl, helm, the agent proxy): "
             "scripts/install.sh builds the others beside those Go builds."),
    cluster: str = typer.Option("default", "--cluster", help="Cluster name."),
    provider: str = typer.Option("local", "--provider", help="local | kind | existing"),
) -> None:
    """Build every image under images/ and charts/*/images/ (cached by input hash)."""
    from sregym.cluster.images import build_images

    console = Console()
    started = time.monotonic()
    what = dict(only=only or None, load=load, without_binaries=without_binaries, provider=provider, cluster=cluster)
    if not console.is_terminal:  # a log file or CI: a line per step, else nothing shows for minutes
        def log_line(name: str, what: str) -> None:
            console.print(f"[{time.monotonic() - started:6.1f}s] {name}: {what}", highlight=False)
        results = build_images(on_event=log_line, **what)
    else:
        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                      transient=True) as progress:
            task = progress.add_task("discovering images", total=None)
            results = build_images(on_event=lambda name, step: progress.update(task, description=f"{name}: {step}"),
                                   **what)
    table = Table("image", "reference", "status", "loaded", "seconds")
    for r in results:
        table.add_row(r.name, r.refs[0], r.status, "yes" if r.loaded else "-", f"{r.seconds:.1f}")
    console.print(table)
    console.print(f"{len(results)} images in {time.monotonic() - started:.1f}s; archives under "
                  f"{results[0].archive.parent.parent if results else '-'}")


@images_app.command("list")
def list_images() -> None:
    """Every image the repository defines and the reference charts should use."""
    from sregym.cluster.images import image_ref, known_images

    table = Table("image", "reference")
    for name in known_images():
        table.add_row(name, image_ref(name))
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add the `images` command group to the sregym CLI."""
    app.add_typer(images_app, name="images")
