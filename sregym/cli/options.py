"""Options shared by the problem and run commands (this module registers no command)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sregym.core.loader import Catalog, load_catalog
from sregym.core.registry import import_path

ProblemsDirOpt = Annotated[list[Path], typer.Option(
    "--problems-dir", help="Extra folder of problem YAML files (repeatable); problems/ is always searched.")]
PluginsOpt = Annotated[list[Path], typer.Option(
    "--plugins", help="Folder of Python modules to import first, e.g. your own injectors or oracles (repeatable).")]
KubeconfigOpt = Annotated[Optional[Path], typer.Option(
    help="Kubeconfig of the cluster; default: the last `sregym cluster up`, else the local cluster.")]
ContextOpt = Annotated[Optional[str], typer.Option(help="Kubeconfig context.")]
TagOpt = Annotated[list[str], typer.Option("--tag", help="Only problems with this tag (repeatable: all must match).")]
DifficultyOpt = Annotated[list[str], typer.Option("--difficulty", help="easy, medium or hard (repeatable: any).")]
AppOpt = Annotated[list[str], typer.Option("--app", help="Only problems on this app (repeatable: any).")]
SplitOpt = Annotated[list[str], typer.Option("--split", help="train, dev or test (repeatable: any).")]
GradeWindowOpt = Annotated[float, typer.Option(help="Seconds each mitigation oracle watches.")]
VerifyTimeoutOpt = Annotated[float, typer.Option(help="Seconds a fault has to take effect.")]
ChartsDirOpt = Annotated[list[Path], typer.Option("--charts-dir", help="Extra folder of app charts (repeatable).")]


def load_plugins(plugins: list[Path]) -> None:
    """Import the user's plug-in folders so their decorators register injectors and oracles."""
    import traceback

    from sregym.core.errors import SregymError, UserInputError

    for folder in plugins:
        if not folder.is_dir():
            raise UserInputError(f"--plugins {folder}: not a folder")
        try:
            import_path(folder)
        except SregymError:
            raise
        except SyntaxError as e:
            raise UserInputError(f"{e.filename}:{e.lineno}: syntax error: {e.msg}") from None
        except Exception as e:  # noqa: BLE001 - a plug-in that fails to import is the user's to fix
            frames = [f for f in traceback.extract_tb(e.__traceback__)
                      if Path(f.filename).resolve().is_relative_to(folder.resolve())]
            where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else str(folder)
            raise UserInputError(f"{where}: importing the plug-in failed: {type(e).__name__}: {e}",
                                 hint="run with --debug for the traceback") from e


def catalog(problems_dir: list[Path], plugins: list[Path]) -> Catalog:
    load_plugins(plugins)
    return load_catalog(problems_dir)
