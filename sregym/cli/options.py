"""Options shared by the problem and run commands (this module registers no command), and the
run-settings option group that builds a ``RunSettings`` for ``sregym run`` and ``sregym suite run``."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from sregym.core.errors import UserInputError
from sregym.core.loader import Catalog, load_catalog, read_yaml, validate_model
from sregym.core.registry import import_path
from sregym.core.settings import RunSettings

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
    if plugins:
        _say_what_plugins_replace()


def _say_what_plugins_replace() -> None:
    """A user's plug-in with a built-in's name replaces it (an edited copy of ``injectors/``):
    say so, once the built-ins are loaded too, so no run uses a changed primitive unknowingly."""
    import sys

    from rich.console import Console

    from sregym.agentplane.agents import AGENTS
    from sregym.injectors import INJECTORS
    from sregym.oracles import DIAGNOSIS_ORACLES, MITIGATION_ORACLES

    console = Console(stderr=True)
    for registry in (INJECTORS, MITIGATION_ORACLES, DIAGNOSIS_ORACLES, AGENTS):
        registry.load()
        for name, (builtin, user) in sorted(registry.replaced.items()):
            where = getattr(sys.modules.get(user), "__file__", user)
            console.print(f"note: {registry.kind} {name!r} from {where} replaces the built-in one ({builtin})",
                          highlight=False, soft_wrap=True)


def catalog(problems_dir: list[Path], plugins: list[Path]) -> Catalog:
    load_plugins(plugins)
    return load_catalog(problems_dir)


# -- the run settings (sregym.core.settings.RunSettings): one definition per option -----------------

class Noise(str, Enum):
    on = "on"
    off = "off"
    both = "both"


NoiseOpt = Annotated[Noise, typer.Option(help="Seeded transient noise during the run: on or off (a suite may "
                                              "run each cell both ways).")]
_DEFAULTS = RunSettings()
_SETTINGS_OPTIONS: dict[str, tuple[Any, Any]] = {  # name: (annotation, default)
    "settings_file": (Annotated[Optional[Path], typer.Option(
        "--settings", help="YAML or JSON file of run settings (schema: `sregym schema`); options given here "
                           "override its values.")], None),
    "agent": (Annotated[str, typer.Option(help="Agent name: noop, random, react, command, oracle, ...")],
              _DEFAULTS.agent),
    "model": (Annotated[Optional[str], typer.Option(help="Model name, for LLM agents (react).")], None),
    "base_url": (Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint, for LLM agents.")], None),
    "agent_image": (Annotated[Optional[str], typer.Option(
        help="--agent command: image of its sandbox pod (default: sregym/workbench; yours starts FROM it).")], None),
    "agent_egress": (Annotated[Optional[list[str]], typer.Option(
        help="--agent command: CIDR:PORT its sandbox pod may reach (a model endpoint); repeatable.")], None),
    "agent_host": (Annotated[bool, typer.Option(
        help="--agent command: run on this host instead of the sandbox pod (needs --run-as USER as root).")], False),
    "run_as": (Annotated[Optional[str], typer.Option(
        help="With --agent-host: the unprivileged user the command runs as (never root).")], None),
    "seed": (Annotated[int, typer.Option(help="Run seed: the same seed gives the same timeline and noise.")],
             _DEFAULTS.seed),
    "noise": (NoiseOpt, Noise.on),
    "budget_steps": (Annotated[Optional[int], typer.Option(min=1, help="Max tool calls (default: the problem's).")],
                     None),
    "budget_seconds": (Annotated[Optional[float], typer.Option(
        min=1, help="Agent wall time per run (default: the problem's).")], None),
    "budget_tokens": (Annotated[Optional[int], typer.Option(min=1, help="Max model tokens (LLM agents).")], None),
    "baseline_window": (Annotated[float, typer.Option(help="Seconds of SLO baseline before injection.")],
                        _DEFAULTS.baseline_window),
    "grade_window": (GradeWindowOpt, _DEFAULTS.grade_window),
    "verify_timeout": (VerifyTimeoutOpt, _DEFAULTS.verify_timeout),
    "charts_dir": (ChartsDirOpt, []),
    "plugins": (PluginsOpt, []),
}


def command_agent_options(agent: str, image: str | None, egress: list[str] | None, host: bool,
                          run_as: str | None) -> dict:
    """The sandbox options of ``--agent command``; refused with any other agent (they run in-process)."""
    given = {"--agent-image": image, "--agent-egress": egress, "--agent-host": host, "--run-as": run_as}
    if agent != "command":
        named = [flag for flag, value in given.items() if value]
        if named:
            raise UserInputError(f"{', '.join(named)} only apply to --agent command (got --agent {agent})")
        return {}
    options: dict = {"host": host}
    if image:
        options["image"] = image
    if egress:
        options["egress"] = egress
    if run_as:
        options["run_as"] = run_as
    return options


def load_run_settings(path: Path) -> RunSettings:
    """Run settings from a YAML or JSON file; an error names the file, line and field."""
    data, source = read_yaml(path)
    return validate_model(RunSettings, data, source)


def build_run_settings(values: dict[str, Any], given: set[str]) -> RunSettings:
    """RunSettings from the option group's ``values``: the ``--settings`` file (if any), then the
    options ``given`` on the command line over it; what neither sets keeps its default (the options'
    defaults are the settings' defaults). ``model_fields_set`` tells what was set."""
    path = values["settings_file"]
    base = load_run_settings(path).model_dump(exclude_unset=True) if path is not None else {}
    if values["noise"] is Noise.both and "noise" in given:
        raise UserInputError("--noise both is for `sregym suite run`; a run plays one setting (on or off)")
    fields = {"agent": "agent", "seed": "seed", "noise": "noise", "budget_steps": "budget_steps",
              "budget_seconds": "budget_seconds", "budget_tokens": "budget_tokens",
              "baseline_window": "baseline_window", "grade_window": "grade_window",
              "verify_timeout": "verify_timeout", "plugins": "plugins", "charts_dir": "charts_dirs"}
    update = {field: values[option] for option, field in fields.items() if option in given}
    if "noise" in update:
        update["noise"] = update["noise"] is Noise.on
    options = {k: v for k, v in {"model": values["model"], "base_url": values["base_url"]}.items() if v}
    options.update(command_agent_options(update.get("agent", base.get("agent", RunSettings().agent)),
                                         values["agent_image"], values["agent_egress"], values["agent_host"],
                                         values["run_as"]))
    if options:
        update["agent_options"] = {**base.get("agent_options", {}), **options}
    return RunSettings.model_validate(base | update)


def run_settings_options(*, leave_out: Sequence[str] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a typer command the run-settings option group (less ``leave_out``, which the command
    declares itself or does not take) and call it with ``settings: RunSettings`` built from them."""
    names = [n for n in _SETTINGS_OPTIONS if n not in leave_out]

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "settings"]
        added = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=_SETTINGS_OPTIONS[n][0],
                                   default=_SETTINGS_OPTIONS[n][1]) for n in names]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            ctx: typer.Context = kwargs.pop("settings_context")
            given = {n for n in names if getattr(ctx.get_parameter_source(n), "name", "DEFAULT") != "DEFAULT"}
            values = {n: kwargs.pop(n) for n in names} | {n: _SETTINGS_OPTIONS[n][1] for n in leave_out}
            return command(**kwargs, settings=build_run_settings(values, given))

        # the command's required options first, then the group, then the command's other options
        required = [p for p in own if p.default is inspect.Parameter.empty]
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                  for p in [*required, *added, *(p for p in own if p not in required)]]
        # typer hands the command's context to a parameter of this type: it tells which options were given
        params.append(inspect.Parameter("settings_context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))
        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate
