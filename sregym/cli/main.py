"""The ``sregym`` command: a typer app whose commands come from every module of ``sregym.cli``
that defines ``register(app: typer.Typer) -> None``.

Errors a user can cause (``SregymError``) print as one red line plus a hint on stderr and exit
with the error's code; usage errors exit 2; Ctrl-C exits 130; ``--debug`` (or SREGYM_DEBUG=1)
shows the traceback instead. Exit codes are listed in ``sregym.core.errors`` and docs/cli.md.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import signal
import sys
import traceback
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

import sregym.cli
from sregym.core.errors import SregymError

_state = {"debug": os.environ.get("SREGYM_DEBUG", "") not in ("", "0")}


def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
    version: Annotated[bool, typer.Option("--version", help="Print the sregym version and exit.")] = False,
) -> None:
    """Benchmark AI agents on live SRE incidents in a real Kubernetes cluster.

    Exit codes: 0 ok, 1 internal error, 2 bad input, 3 cluster error, 4 missing prerequisite,
    5 fault could not be applied/verified, 130 interrupted.
    """
    _state["debug"] = _state["debug"] or debug
    if version:
        typer.echo(sregym.__version__)
        raise typer.Exit(0)


def build_app() -> typer.Typer:
    """The root app with every command module's ``register`` called (sorted by module name)."""
    app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                      context_settings={"help_option_names": ["-h", "--help"]})
    app.callback(invoke_without_command=True)(_root)
    for info in sorted(pkgutil.iter_modules(sregym.cli.__path__), key=lambda i: i.name):
        if info.name in ("main", "__main__") or info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"sregym.cli.{info.name}")
        except Exception as e:  # noqa: BLE001 - one broken command module must not take the CLI down
            if _state["debug"]:
                traceback.print_exc()
            Console(stderr=True).print(f"[yellow]warning:[/] commands of sregym.cli.{info.name} are unavailable: "
                                       f"{escape(str(e))}", highlight=False)
            continue
        register = getattr(module, "register", None)
        if callable(register):
            register(app)
    return app


def report_error(e: SregymError) -> None:
    err = Console(stderr=True, soft_wrap=True)
    err.print(f"[bold red]error:[/] {escape(e.message)}", highlight=False)
    if e.hint:
        err.print(f"  [dim]hint:[/] {escape(e.hint)}", highlight=False)


def run_cli(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` and return the exit code (tests call this in-process)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--debug" in args:
        _state["debug"] = True
    app = build_app()
    try:
        try:
            rv = app(args=args, prog_name="sregym", standalone_mode=False)
        except BaseExceptionGroup as group:  # one error from inside a task group: report it as itself
            while isinstance(group, BaseExceptionGroup) and len(group.exceptions) == 1:
                group = group.exceptions[0]
            raise group from None
    except typer.Exit as e:
        return e.exit_code
    except typer.TyperException as e:  # usage errors: bad option, missing argument (exit 2)
        e.show()
        return getattr(e, "exit_code", 2)
    except (typer.Abort, KeyboardInterrupt):
        Console(stderr=True).print("[yellow]interrupted[/] (run `sregym cleanup` if a run was in flight)")
        return 130
    except SregymError as e:
        if _state["debug"]:
            traceback.print_exc()
        report_error(e)
        return e.exit_code
    except Exception:
        if _state["debug"]:
            raise
        Console(stderr=True).print_exception(show_locals=False, max_frames=8)
        Console(stderr=True).print("[bold red]internal error[/] (a bug): please report it with the output of --debug")
        return 1
    if rv == 130:  # typer turns Ctrl-C into exit code 130 by itself
        Console(stderr=True).print("[yellow]interrupted[/] (run `sregym cleanup` if a run was in flight)")
    return rv if isinstance(rv, int) else 0


def main() -> None:
    """Console entry point (``sregym``)."""
    # SIGTERM (kill, a deleted CronJob pod, a CI timeout) stops like Ctrl-C: a run in flight recovers
    # its faults and writes its record, then exits 130
    # (re-sent as SIGINT, so whoever handles Ctrl-C at that moment, e.g. the event loop, handles it)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    # A shell starts a background job (`sregym validate --all &`, nohup) with SIGINT ignored, and
    # Python then installs no Ctrl-C handler: the SIGINT above would be dropped and `kill` ignored.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(run_cli())


if __name__ == "__main__":
    main()
