"""The MCP server the agent talks to: kubectl, metrics, logs, traces, and the two submissions.

It is started as its own process (``python -m sregym.agentplane.server``) with nothing but the
agent's kubeconfig, the observability URLs, the namespace, the budgets and a callback URL, in a
scrubbed environment that also holds the run's bearer token (every HTTP request must carry it).
It cannot import problem specs, ground truth, oracles or injectors (an import-linter contract
enforces it), so nothing the agent can reach through it names the fault.

Every call passes through :meth:`AgentToolServer.call_tool`, which meters the step and time budget,
times the call, and reports it (name, arguments, duration, result size, error, invalid,
read-only, kubectl verb) to the conductor.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, BeforeValidator, Field, ValidationError

from sregym.agentplane import observability as obs
from sregym.agentplane.access_token import MCP_TOKEN_ENV, MIN_TOKEN_CHARS, BearerTokenGate
from sregym.agentplane.budgets import AgentBudgets, BudgetMeter
from sregym.agentplane.events import (CALLBACK_TOKEN_ENV, CallbackSink, EventSink, JsonLinesSink, SubmissionEvent,
                                      ToolCallEvent, clip_arguments, clip_result)
from sregym.agentplane.timeparse import TimeFormatError
from sregym.cluster.scratch import make_scratch_dir  # top level: the workbench image's closure test sees it
from sregym.core.kubectl_args import MAX_COMMAND_CHARS, MAX_STDIN_CHARS, KubectlArgsError, parse_kubectl

READY_PREFIX = "SREGYM_MCP_READY "
# What a diagnosis may hold at all, so records stay small (the judge reads less: 4000 characters).
MAX_DIAGNOSIS_CHARS, MAX_FIELD_CHARS = 20000, 2000
MCP_PATH = "/mcp"
# The grader reads these from the record; the kubectl tool refuses longer ones, so they are kept whole.
KUBECTL_RECORDED_WHOLE = {"command": MAX_COMMAND_CHARS, "stdin": MAX_STDIN_CHARS}


class ServerSettings(BaseModel):
    """Everything the server is allowed to know."""

    kubeconfig: Path
    namespace: str
    prometheus_url: str | None = None
    traces_url: str | None = None
    logs_url: str | None = None
    budgets: AgentBudgets = Field(default_factory=AgentBudgets)
    output_limit: int = Field(16000, gt=100, description="characters of tool output before truncation")
    kubectl_timeout: float = Field(60.0, gt=0)
    kubectl: str | None = Field(None, description="kubectl binary (default: the cluster's, else PATH's)")


class RefusedCall(ToolError):
    """A call the server refuses (bad arguments, budget spent): counted as an invalid action."""


def _text_result(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error,
                          structured_content=structured)


def _result_text(result: Any) -> str:
    if isinstance(result, CallToolResult):
        return "".join(getattr(c, "text", "") or "" for c in result.content)
    return ""


def _result_size(result: Any) -> int:
    return len(_result_text(result))


def _result_error(result: Any) -> str | None:
    if isinstance(result, CallToolResult) and result.is_error:
        return " ".join(getattr(c, "text", "") for c in result.content)[:500] or "error"
    return None


class AgentToolServer(MCPServer):
    """An MCPServer whose every tool call is metered and reported."""

    def __init__(self, settings: ServerSettings, sink: EventSink) -> None:
        super().__init__(name="sre-tools", instructions=(
            f"Tools of the on-call SRE for the application in namespace {settings.namespace}. Investigate with "
            "kubectl, metrics, logs and traces; change what needs changing; then call submit_diagnosis and "
            "submit_mitigation."), log_level="WARNING")
        self.agent_settings = settings
        self.meter = BudgetMeter(settings.budgets)
        self.sink = sink
        self.events_lost = 0

    async def report(self, event: ToolCallEvent | SubmissionEvent) -> None:
        try:
            await self.sink.send(event)
        except Exception as e:  # noqa: BLE001 - a lost log line must not fail the agent's call
            self.events_lost += 1
            print(f"sregym mcp: could not report {event.type}: {e}", file=sys.stderr)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        started_wall, started = time.time(), time.monotonic()
        tool = self._tool_manager.get_tool(name)
        received = _as_received(tool, arguments)
        verb, read_only = _classify(name, received)
        refusal = self.meter.take(name) if tool else None
        event = ToolCallEvent(at=started_wall, tool=name,
                              arguments=clip_arguments(received, KUBECTL_RECORDED_WHOLE if name == "kubectl" else None),
                              read_only=read_only, verb=verb)
        try:
            if refusal:
                raise RefusedCall(refusal)
            result = await super().call_tool(name, arguments, context)
        except ToolError as e:
            event.error = str(e)[:500]
            event.result_text = clip_result(str(e))
            # unknown tool, schema violation, or our own refusal: the agent's invalid action
            event.invalid = isinstance(e, RefusedCall) or isinstance(e.__cause__, (ValidationError, RefusedCall)) \
                or self._tool_manager.get_tool(name) is None
            event.duration_s = time.monotonic() - started
            await self.report(event)
            raise
        event.duration_s = time.monotonic() - started
        event.result_bytes = _result_size(result)
        event.result_text = clip_result(_result_text(result))
        event.error = _result_error(result)
        await self.report(event)
        return result


def _as_received(tool: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the tool function receives them, which is what is classified and recorded.

    The SDK decodes JSON inside a string (``'["delete", "deploy", "x"]'`` becomes a list) before it calls the
    tool; recording the string as sent would let the grader read something other than what ran.
    Keys the tool does not take are kept as sent (the tool never sees them).
    """
    if tool is None:
        return arguments
    try:
        validated = tool.fn_metadata.validate_arguments(arguments)
    except Exception:  # noqa: BLE001 - the SDK refuses the call the same way; it never runs
        return arguments
    return {**arguments, **{key: value for key, value in validated.items() if key in arguments}}


def _classify(name: str, arguments: dict[str, Any]) -> tuple[str | None, bool]:
    """(kubectl verb, read-only) of a call, for the record."""
    if name == "kubectl":
        try:
            call = parse_kubectl(arguments.get("command") or [], stdin=arguments.get("stdin"))
            return call.verb, call.read_only
        except (KubectlArgsError, TypeError):
            return None, True
    return None, name not in ("submit_diagnosis", "submit_mitigation")


def _scrubbed_kubectl_env(home: str) -> dict[str, str]:
    # No KUBECONFIG from outside and an empty HOME: kubectl can only find the agent's kubeconfig.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8"}


def build_server(settings: ServerSettings, sink: EventSink) -> AgentToolServer:
    """The MCP server with the tools that the settings make available."""
    from sregym.cluster.kube import kubectl_path

    server = AgentToolServer(settings, sink)
    kubectl_exe = settings.kubectl or kubectl_path()
    kubeconfig = str(settings.kubeconfig.resolve())
    # kubectl's cwd and HOME: an empty folder, nothing to read there. Its parent carries the owner
    # marker `sregym cleanup` sweeps by when this server is killed; a normal exit removes it.
    scratch = make_scratch_dir("sre-tools-")
    atexit.register(shutil.rmtree, scratch, True)
    workdir = str(scratch / "kubectl")
    os.mkdir(workdir, 0o700)
    limit = settings.output_limit
    log_access: dict[str, bool] = {}  # namespace -> may the agent read its pod logs (asked once)

    @server.tool(annotations=ToolAnnotations(title="kubectl", read_only_hint=False, destructive_hint=True,
                                             idempotent_hint=False, open_world_hint=False))
    async def kubectl(
        command: Annotated[list[str] | str, Field(description=(
            "kubectl arguments, as a list ([\"get\", \"pods\", \"-n\", \"NS\"]) or one string (\"get pods -n NS\"); "
            "no shell operators"))],
        # A plain str, so the SDK passes a JSON manifest through as text instead of decoding it into an
        # object the schema then refuses; null is read as no stdin.
        stdin: Annotated[str, BeforeValidator(lambda v: "" if v is None else v),
                         Field(description="text piped to kubectl, e.g. a manifest for `apply -f -`")] = "",
    ) -> CallToolResult:
        """Run kubectl with the on-call SRE's credentials. Read verbs (get, describe, logs, top, events, ...)
        and write verbs (apply, patch, scale, rollout, set, delete, ...) are allowed with their usual flags,
        except flags that use local files, change identity, watch or are interactive; manifests go in `stdin`
        with `-f -`. Long output is cut: narrow with -l, --field-selector or -o jsonpath."""
        try:
            call = parse_kubectl(command, stdin=stdin)
        except KubectlArgsError as e:
            raise RefusedCall(str(e)) from None
        argv = [kubectl_exe, "--kubeconfig", kubeconfig, *call.args]
        try:
            done = await run_capped(argv, stdin or None, workdir, settings.kubectl_timeout, limit)
        except TimeoutError:
            return _text_result(f"kubectl {call.verb} did not finish within {settings.kubectl_timeout:g}s and was "
                                "stopped; narrow the request", error=True)
        text, cut = kubectl_output(done, limit)
        failed = done.returncode != 0 and not done.cut  # stopped for its size is not a failure of the command
        return _text_result(text, error=failed, structured={
            "verb": call.verb, "exit_code": None if done.cut else done.returncode, "output": text, "truncated": cut})

    if settings.prometheus_url:
        prom = settings.prometheus_url

        @server.tool(annotations=ToolAnnotations(title="query metrics", read_only_hint=True, open_world_hint=False))
        async def query_metrics(
            query: Annotated[str, Field(description="PromQL, e.g. sum by (pod) (rate(container_cpu_usage_seconds_total[5m]))")],
            start: Annotated[str | None, Field(description="range start: now-15m, 15m (ago), unix seconds or RFC 3339; omit for an instant query")] = None,
            end: Annotated[str | None, Field(description="range end (default now)")] = None,
            step: Annotated[str | None, Field(description="range step, e.g. 30s (default: about 60 points)")] = None,
        ) -> dict[str, Any]:
            """Query Prometheus: an instant query, or a range query when start is given."""
            return await _blocking(obs.query_metrics, prom, query, start, end, step)

    if settings.traces_url:
        traces_url = settings.traces_url

        @server.tool(annotations=ToolAnnotations(title="query traces", read_only_hint=True, open_world_hint=False))
        async def query_traces(
            service: Annotated[str, Field(description="service name as it reports traces")],
            operation: Annotated[str | None, Field(description="operation (span) name")] = None,
            start: Annotated[str | None, Field(description="now-15m, 15m (ago), unix seconds or RFC 3339 (default 15m ago)")] = None,
            end: Annotated[str | None, Field(description="default now")] = None,
            errors_only: Annotated[bool, Field(description="only traces with an error span")] = False,
            limit: Annotated[int, Field(ge=1, le=obs.MAX_TRACES)] = 10,
        ) -> dict[str, Any]:
            """Recent traces of a service in your namespace, one summary per trace (root span, duration,
            services, error spans, the pod that sent each)."""
            return await _blocking(partial(obs.query_traces, namespace=settings.namespace), traces_url, service,
                                   operation, start, end, errors_only, limit)

    @server.tool(annotations=ToolAnnotations(title="query logs", read_only_hint=True, open_world_hint=False))
    async def query_logs(
        namespace: Annotated[str, Field(description="namespace of the pods")],
        pod: Annotated[str | None, Field(description="pod name or name prefix (e.g. a deployment name)")] = None,
        container: Annotated[str | None, Field(description="container name")] = None,
        since: Annotated[str | None, Field(description="now-15m, 15m (ago), unix seconds or RFC 3339 (default 1h ago)")] = None,
        until: Annotated[str | None, Field(description="default now")] = None,
        text: Annotated[str | None, Field(description="keep lines containing this text (case-insensitive)")] = None,
        limit: Annotated[int, Field(ge=1, le=obs.MAX_LOG_LINES)] = 200,
    ) -> dict[str, Any]:
        """Log lines of pods in a namespace, newest first, filtered by pod, container, time and text."""
        if settings.logs_url:
            if namespace not in log_access:
                log_access[namespace] = await _blocking(obs.can_read_logs, kubeconfig, namespace)
            if not log_access[namespace]:
                raise ToolError(f"your access does not include the logs of namespace {namespace!r}")
            return await _blocking(obs.query_log_service, settings.logs_url, namespace, pod, container, since, until,
                                   text, limit)
        return await _blocking(obs.query_kube_logs, kubeconfig, namespace, pod, container, since,
                               until, text, limit)

    @server.tool(annotations=ToolAnnotations(title="submit diagnosis", read_only_hint=False, destructive_hint=False,
                                             idempotent_hint=False, open_world_hint=False))
    async def submit_diagnosis(
        text: Annotated[str, Field(min_length=1, max_length=MAX_DIAGNOSIS_CHARS, description=(
            "what is wrong and why, in an SRE's words; be concise: the grader reads the first 4000 characters"))],
        component: Annotated[str | None, Field(max_length=MAX_FIELD_CHARS, description="the faulty component")] = None,
        mechanism: Annotated[str | None, Field(max_length=MAX_FIELD_CHARS, description="how it fails")] = None,
        details: Annotated[str | None, Field(max_length=MAX_FIELD_CHARS,
                                             description="concrete evidence: values, names, messages")] = None,
    ) -> str:
        """Submit your diagnosis of the incident (the last one submitted counts)."""
        fields = {k: v for k, v in (("component", component), ("mechanism", mechanism), ("details", details)) if v}
        await _submit(server, SubmissionEvent(at=time.time(), kind="diagnosis", text=text, fields=fields))
        return "diagnosis recorded"

    @server.tool(annotations=ToolAnnotations(title="submit mitigation", read_only_hint=False, destructive_hint=False,
                                             idempotent_hint=True, open_world_hint=False))
    async def submit_mitigation() -> str:
        """Declare that mitigation is done. This ends your work on the incident; the system is then checked."""
        await _submit(server, SubmissionEvent(at=time.time(), kind="mitigation"))
        return "mitigation recorded; the episode ends now"

    return server


async def _submit(server: AgentToolServer, event: SubmissionEvent) -> None:
    try:
        await server.sink.send(event)
    except Exception as e:  # noqa: BLE001 - the agent must learn its submission was not taken
        raise ToolError(f"the submission could not be recorded ({e}); try again") from None


async def _blocking(fn: Any, *args: Any) -> dict[str, Any]:
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except (obs.QueryError, TimeFormatError) as e:
        raise ToolError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - e.g. the API unreachable: the agent should read why, not crash
        raise ToolError(f"the query failed: {type(e).__name__}: {str(e)[:300]}") from None


@dataclass
class Finished:
    """A finished kubectl: exit code, what it printed (at most the cap per stream), and which stream was cut."""

    returncode: int
    stdout: bytes
    stderr: bytes
    cut: tuple[str, ...] = ()


async def run_capped(argv: list[str], stdin: str | None, cwd: str, timeout: float, cap: int) -> Finished:
    """Run kubectl, keeping at most ``cap`` bytes of stdout and of stderr while they are read.

    Once a stream passes its cap, kubectl is killed (its own PID) and reading stops, so a huge output
    never sits in memory. On timeout it is killed too, and TimeoutError raised."""
    proc = await anyio.open_process(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                                    env=_scrubbed_kubectl_env(cwd))
    out, err = bytearray(), bytearray()
    cut: list[str] = []

    async def drain(stream: Any, buf: bytearray, name: str) -> None:
        async for chunk in stream:
            room = cap - len(buf)
            buf.extend(chunk[:room])
            if len(chunk) > room:
                cut.append(name)
                _kill(proc)
                return

    async def feed() -> None:
        try:
            await proc.stdin.send(stdin.encode())
            await proc.stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # kubectl did not read it all (or was stopped): its output says what happened

    try:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, proc.stdout, out, "stdout")
                tg.start_soon(drain, proc.stderr, err, "stderr")
                if stdin is not None and proc.stdin is not None:
                    tg.start_soon(feed)
            await proc.wait()
    except TimeoutError:
        _kill(proc)
        with anyio.CancelScope(shield=True):
            await proc.wait()
        raise
    finally:
        with anyio.CancelScope(shield=True):
            for stream in (proc.stdout, proc.stderr):
                await stream.aclose()  # what is still unread is dropped, never buffered
    return Finished(proc.returncode or 0, bytes(out), bytes(err), tuple(cut))


def _kill(proc: Any) -> None:
    if proc.returncode is None:
        try:
            proc.kill()  # our own child, by PID
        except ProcessLookupError:
            pass


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Keep at most ``limit`` characters and say how much was cut, so the agent can narrow its query."""
    if len(text) <= limit:
        return text, False
    note = (f"\n[output truncated: showed {limit} of {len(text)} characters; narrow the query "
            "(-l selector, --field-selector, -o jsonpath, --tail, a smaller time range)]")
    return text[:limit] + note, True


def kubectl_output(done: Finished, limit: int) -> tuple[str, bool]:
    """What the agent reads, as a terminal shows it: stdout, then stderr (warnings, "No resources found",
    -v logs, errors), at most ``limit`` characters."""
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    text = out + ("\n" if out and err else "") + err
    text, cut = truncate(text.strip() or "(no output)", limit)
    if done.cut and not cut:
        text += (f"\n[output cut: kubectl's {' and '.join(done.cut)} passed {limit} characters and kubectl was "
                 "stopped there; narrow the query (-l selector, --field-selector, -o jsonpath, --tail)]")
    return text, cut or bool(done.cut)


def listen(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening socket for the HTTP transport (port 0: a free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


async def serve_http(server: AgentToolServer, sock: socket.socket, token: str) -> None:
    """Serve Streamable HTTP on an already listening socket until cancelled; every request needs ``token``."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=sock.getsockname()[0])
    app = BearerTokenGate(app, token)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    return ServerSettings(
        kubeconfig=Path(args.kubeconfig), namespace=args.namespace, prometheus_url=args.prometheus_url or None,
        traces_url=args.traces_url or None, logs_url=args.logs_url or None,
        budgets=AgentBudgets(steps=args.steps, seconds=args.seconds),
        output_limit=args.output_limit, kubectl_timeout=args.kubectl_timeout, kubectl=args.kubectl)


def argument_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sregym.agentplane.server", description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--prometheus-url")
    p.add_argument("--traces-url")
    p.add_argument("--logs-url")
    p.add_argument("--steps", type=int, default=AgentBudgets().steps)
    p.add_argument("--seconds", type=float, default=AgentBudgets().seconds)
    p.add_argument("--output-limit", type=int, default=16000)
    p.add_argument("--kubectl-timeout", type=float, default=60.0)
    p.add_argument("--kubectl", help="kubectl binary (default: the cluster's build, else PATH's)")
    p.add_argument("--callback-url", help=f"conductor receiver; its token is read from ${CALLBACK_TOKEN_ENV}")
    p.add_argument("--events-file", help="without --callback-url: append events here (default: stderr)")
    p.add_argument("--transport", choices=("http", "stdio"), default="http")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    return p


def make_sink(callback_url: str | None, events_file: str | None) -> EventSink:
    if callback_url:
        return CallbackSink(callback_url, os.environ.get(CALLBACK_TOKEN_ENV))
    return JsonLinesSink(Path(events_file) if events_file else None)


def run(settings: ServerSettings, *, transport: str = "http", host: str = "127.0.0.1", port: int = 0,
        callback_url: str | None = None, events_file: str | None = None, on_ready=None) -> None:
    """Run the server until interrupted. For HTTP, ``on_ready(url)`` is called once it listens; the
    bearer token every request must carry is read from $SREGYM_MCP_TOKEN (stdio needs none)."""
    if not settings.kubeconfig.is_file():
        raise SystemExit(f"agent kubeconfig {settings.kubeconfig} does not exist")
    token = os.environ.get(MCP_TOKEN_ENV, "")
    if transport == "http" and len(token) < MIN_TOKEN_CHARS:
        raise SystemExit(f"the HTTP transport needs a bearer token of at least {MIN_TOKEN_CHARS} characters in "
                         f"${MCP_TOKEN_ENV} (`sregym mcp serve` mints one)")
    server = build_server(settings, make_sink(callback_url, events_file))
    if transport == "stdio":
        anyio.run(server.run_stdio_async)
        return
    sock = listen(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{bound_host}:{bound_port}{MCP_PATH}"
    (on_ready or (lambda u: print(READY_PREFIX + u, flush=True)))(url)
    anyio.run(serve_http, server, sock, token)


def main(argv: list[str] | None = None) -> None:
    args = argument_parser().parse_args(argv)
    try:
        run(settings_from_args(args), transport=args.transport, host=args.host, port=args.port,
            callback_url=args.callback_url, events_file=args.events_file)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
