"""``sregym mcp serve|access|revoke``, ``sregym agents``, ``sregym trajectory export``.

For agents that bring their own tools (or their own loop): serve the agent's API proxy and get its
kubeconfig with ``sregym mcp access`` (it runs until stopped), then serve the MCP tools with
``sregym mcp serve``; both print the raw endpoints an agent may use directly.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from sregym.cli.options import ContextOpt, KubeconfigOpt
from sregym.core.errors import UserInputError

mcp_app = typer.Typer(help="The agent's MCP tool server and credentials, for agents that bring their own loop.",
                      no_args_is_help=True)
trajectory_app = typer.Typer(help="Trajectories of runs.", no_args_is_help=True)
err = Console(stderr=True)

NamespaceOpt = Annotated[str, typer.Option("--namespace", "-n", help="The app namespace the agent works on.")]


@mcp_app.command("serve")
def serve(
    agent_kubeconfig: Annotated[Path, typer.Option("--agent-kubeconfig", help="The agent's kubeconfig "
                                                   "(from `sregym mcp access`); never an admin one.")],
    namespace: NamespaceOpt,
    prometheus_url: Annotated[Optional[str], typer.Option(help="Prometheus base URL.")] = None,
    traces_url: Annotated[Optional[str], typer.Option(help="Jaeger-compatible query API base URL.")] = None,
    logs_url: Annotated[Optional[str], typer.Option(help="Log query service base URL (GET /query; default: "
                                                         "pod logs through the Kubernetes API).")] = None,
    steps: Annotated[int, typer.Option(min=1, help="Tool-call budget (submissions are free).")] = 40,
    seconds: Annotated[float, typer.Option(min=1, help="Wall-time budget.")] = 900,
    transport: Annotated[str, typer.Option(help="http (Streamable HTTP) or stdio.")] = "http",
    port: Annotated[int, typer.Option(help="HTTP port on 127.0.0.1 (0: any free port).")] = 0,
    events_file: Annotated[Optional[Path], typer.Option(help="Append tool calls and submissions here as JSON "
                                                        "lines (default: stderr).")] = None,
) -> None:
    """Serve the agent's MCP tools (kubectl, query_metrics, query_logs, query_traces, submit_*).

    The server replaces this process with a clean one: its environment holds only PATH, LANG, an
    empty HOME and (for http) the bearer token, so it knows nothing but the agent's kubeconfig and
    the URLs given here. Over http every request must send `Authorization: Bearer TOKEN`: the token
    is $SREGYM_MCP_TOKEN when set, else a fresh one printed on stderr."""
    if transport not in ("http", "stdio"):
        raise UserInputError(f"--transport {transport!r}: choose http or stdio")
    if not agent_kubeconfig.is_file():
        raise UserInputError(f"--agent-kubeconfig {agent_kubeconfig}: no such file",
                             hint="create one with `sregym mcp access --namespace NS`")
    from sregym.cluster.kube import kubectl_path

    argv = [sys.executable, "-m", "sregym.agentplane.server", "--kubeconfig", str(agent_kubeconfig.resolve()),
            "--namespace", namespace, "--steps", str(steps), "--seconds", str(seconds), "--transport", transport,
            "--port", str(port), "--kubectl", kubectl_path()]
    for flag, value in (("--prometheus-url", prometheus_url), ("--traces-url", traces_url), ("--logs-url", logs_url),
                        ("--events-file", str(events_file.resolve()) if events_file else None)):
        if value:
            argv += [flag, value]
    from sregym.agentplane.access_token import MCP_TOKEN_ENV, MIN_TOKEN_CHARS, mint_token

    token = os.environ.get(MCP_TOKEN_ENV) or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UserInputError(f"${MCP_TOKEN_ENV} is shorter than {MIN_TOKEN_CHARS} characters",
                             hint="unset it to have a token minted, or set a longer random one")
    if transport == "http":
        if token is None:
            token = mint_token()
            err.print("bearer token for the MCP endpoint (send `Authorization: Bearer TOKEN`):")
            err.print(f"  {MCP_TOKEN_ENV}={token}", soft_wrap=True, markup=False, highlight=False)
        err.print("raw endpoints for agents with their own tools:")
        err.print(f"  KUBECONFIG={agent_kubeconfig.resolve()}")
        for name, value in (("prometheus", prometheus_url), ("traces", traces_url), ("logs", logs_url)):
            if value:
                err.print(f"  {name}: {value}")
        err.print("the MCP URL follows on stdout once the server listens (line starting SREGYM_MCP_READY)")
    import sregym

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": "/nonexistent",
           "PYTHONPATH": str(Path(sregym.__file__).resolve().parent.parent)}
    if transport == "http" and token:
        env[MCP_TOKEN_ENV] = token  # the environment, not argv: argv shows in `ps`
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


@mcp_app.command("access")
def access(namespace: NamespaceOpt,
           out: Annotated[Optional[Path], typer.Option(help="Folder for agent.kubeconfig (default: under "
                                                       "/var/lib/sregym/agent-access/NAMESPACE).")] = None,
           hours: Annotated[float, typer.Option(min=0.01, help="How long the agent's API proxy serves.")] = 4.0,
           kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Grant the agent's rights in NAMESPACE and serve its API proxy in the foreground.

    The kubeconfig printed on stdout works only while this command runs: it holds a token that only
    the proxy accepts (the proxy acts as the agent's ServiceAccount and hides the fault plane).
    Ctrl-C (or --hours) stops the proxy and revokes the access."""
    import time

    from sregym.cluster.agent_access import access_directory, create_agent_access, revoke_agent_access
    from sregym.cluster.agent_proxy import AgentApiProxy, proxy_listen_host, proxy_pki
    from sregym.cluster.providers import current_cluster

    cluster = current_cluster(kubeconfig, context)
    path = (out or access_directory(namespace)) / "agent.kubeconfig"
    try:
        with AgentApiProxy(cluster.kube, namespace, listen_host=proxy_listen_host(cluster),
                           pki=proxy_pki(cluster)) as proxy:
            create_agent_access(cluster.kube, namespace, path.parent, proxy=proxy)
            err.print(f"agent kubeconfig for namespace {namespace!r}, through the API proxy at {proxy.url} "
                      f"(serving {hours:g}h; Ctrl-C stops it and revokes the access):")
            typer.echo(str(path))
            sys.stdout.flush()
            time.sleep(hours * 3600)
    except KeyboardInterrupt:
        pass
    finally:
        revoke_agent_access(cluster.kube, namespace, kubeconfig=path)
    err.print(f"agent access in namespace {namespace!r} revoked")


@mcp_app.command("revoke")
def revoke(namespace: NamespaceOpt, kubeconfig: KubeconfigOpt = None, context: ContextOpt = None) -> None:
    """Delete the agent's ServiceAccount and RBAC in NAMESPACE (its tokens stop working)."""
    from sregym.cluster.agent_access import access_directory, revoke_agent_access
    from sregym.cluster.providers import current_cluster

    revoke_agent_access(current_cluster(kubeconfig, context).kube, namespace,
                        kubeconfig=access_directory(namespace) / "agent.kubeconfig")
    err.print(f"agent access in namespace {namespace!r} revoked")


def agents() -> None:
    """List the agents `--agent` accepts (the privileged ones, such as oracle, run on the conductor's side)."""
    from sregym.agentplane.agents import AGENTS
    from sregym.conductor.agent import CONDUCTOR_AGENTS

    for name, cls in [*AGENTS.items(), *CONDUCTOR_AGENTS.items()]:
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        typer.echo(f"{name:10} {getattr(cls, 'kind', 'baseline'):9} {doc}")


@trajectory_app.command("export")
def export(record: Annotated[Path, typer.Argument(help="A run record JSON file.")],
           out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output file (default: stdout).")] = None,
           ) -> None:
    """Export a run's trajectory in the sregym-trajectory v1 JSON format (docs/trajectory-format.md)."""
    from pydantic import ValidationError

    from sregym.agentplane.export import export_record, write_export
    from sregym.core.record import RunRecord

    try:
        doc = export_record(RunRecord.model_validate_json(record.read_text()))
    except FileNotFoundError:
        raise UserInputError(f"{record}: no such run record") from None
    except ValidationError as e:
        raise UserInputError(f"{record}: not a run record: {e.errors()[0]['loc']}: {e.errors()[0]['msg']}") from None
    if out is None:
        typer.echo(json.dumps(doc, indent=2))
    else:
        err.print(f"wrote {write_export(doc, out)}")


def register(app: typer.Typer) -> None:
    app.add_typer(mcp_app, name="mcp")
    app.add_typer(trajectory_app, name="trajectory")
    app.command("agents")(agents)
