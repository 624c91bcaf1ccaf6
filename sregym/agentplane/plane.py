"""The agent plane as the conductor opens it: the MCP server process plus a receiver for its events.

::

    async with AgentPlane(agent_kubeconfig=path, prometheus_url=..., traces_url=..., logs_url=...,
                          namespace="hotel", budgets=AgentBudgets(steps=40, seconds=900)) as plane:
        task = plane.task(prompt=render_prompt(...), seed=7)
        result = await plane.run_agent(AGENTS.get("react")(model=...), task)
        trajectory = plane.trajectory(result)

With a :class:`~sregym.agentplane.sandbox.Sandbox` (what the conductor always passes), the server
runs as a pod of the run's sandbox namespace, from the workbench image, with the kubeconfig and
tokens in a Secret; agents reach it at the pod's IP, and it reports to a receiver on this host's
address that pods reach (the local cluster's bridge). Without one (``sregym mcp serve``, tests of
the tools), it runs as a separate process on 127.0.0.1 in a scrubbed environment (``PATH``,
``LANG``, an empty ``HOME``, the callback token, the plane's own MCP bearer token). Either way only the agent's kubeconfig, the
observability URLs, the namespace and the budgets reach it, and every tool call and submission is
reported to the receiver, which checks a per-plane bearer token.
"""

from __future__ import annotations

import hmac
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from sregym.agentplane.access_token import MCP_TOKEN_ENV, mint_token
from sregym.agentplane.agents.base import Agent, AgentResult, AgentTask
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.events import CALLBACK_TOKEN_ENV, SubmissionEvent, ToolCallEvent, parse_event
from sregym.agentplane.sandbox import SECRET_DIR, SERVER_POD, SERVER_PORT, Sandbox
from sregym.agentplane.server import MCP_PATH, READY_PREFIX, listen
from sregym.cluster.scratch import make_scratch_dir
from sregym.core.errors import PrerequisiteError
from sregym.core.trajectory import Submission, ToolCall, Trajectory

STARTUP_TIMEOUT = 60.0
# After the time budget the agent gets this long to notice before it is cancelled.
GRACE_SECONDS = 10.0


def server_environment(token: str, home: str, mcp_token: str) -> dict[str, str]:
    """The whole environment of the MCP server process: nothing that names a problem or a cluster admin."""
    import sregym

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": home,
           CALLBACK_TOKEN_ENV: token, MCP_TOKEN_ENV: mcp_token,
           # the package location, so the server imports the same sregym (not a secret: code, not data)
           "PYTHONPATH": str(Path(sregym.__file__).resolve().parent.parent)}
    return env


def recorded_call(event: ToolCallEvent, origin: float) -> ToolCall:
    """One tool call of the trajectory, as the server reported it, timed from ``origin``."""
    return ToolCall(t=round(event.at - origin, 3), tool=event.tool, arguments=event.arguments,
                    duration_s=round(event.duration_s, 4), result_bytes=event.result_bytes,
                    result_text=event.result_text, error=event.error,
                    invalid=event.invalid, read_only=event.read_only, verb=event.verb)


class AgentPlane:
    """Async context manager: starts the tool server and the event receiver, stops both on exit."""

    def __init__(self, agent_kubeconfig: Path, namespace: str, budgets: AgentBudgets | None = None, *,
                 prometheus_url: str | None = None, traces_url: str | None = None, logs_url: str | None = None,
                 kubectl: str | None = None, output_limit: int = 16000, log_dir: Path | None = None,
                 sandbox: Sandbox | None = None,
                 on_tool_call: Callable[[ToolCall], None] | None = None) -> None:
        self.agent_kubeconfig = Path(agent_kubeconfig).resolve()
        self.namespace = namespace
        self.budgets = budgets or AgentBudgets()
        self.prometheus_url, self.traces_url, self.logs_url = prometheus_url, traces_url, logs_url
        self.kubectl = kubectl
        self.output_limit = output_limit
        self.log_dir = log_dir
        self.sandbox = sandbox
        # told each tool call as recorded, when the server reports it (before the agent gets the result)
        self.on_tool_call = on_tool_call
        self.tool_calls: list[ToolCallEvent] = []
        self.submissions: list[SubmissionEvent] = []
        self.mitigation_submitted = anyio.Event()
        self.mcp_url: str | None = None
        self.server_pid: int | None = None
        self.started_at: float | None = None
        self.prompt: str | None = None  # the task prompt, as given (kept in the trajectory)
        self._token = secrets.token_urlsafe(32)
        self.mcp_token = mint_token()  # this plane's only: another cell's agent gets 401 here
        self._stack: AsyncExitStack | None = None
        self._proc: anyio.abc.Process | None = None

    # -- receiver -----------------------------------------------------------------------------
    async def _receive(self, request: Request) -> JSONResponse:
        # constant time: the token must not be guessable byte by byte from response timings
        if not hmac.compare_digest(request.headers.get("authorization", "").encode(), f"Bearer {self._token}".encode()):
            return JSONResponse({"error": "forbidden"}, status_code=403)
        try:
            event = parse_event(await request.body())
        except ValueError as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        if isinstance(event, SubmissionEvent):
            self.submissions.append(event)
            if event.kind == "mitigation":
                self.mitigation_submitted.set()
        else:
            self.tool_calls.append(event)
            if self.on_tool_call is not None:
                self.on_tool_call(recorded_call(event, self.started_at or event.at))
        return JSONResponse({"ok": True})

    async def _serve_receiver(self, sock: Any, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        import uvicorn

        app = Starlette(routes=[Route("/events", self._receive, methods=["POST"])])
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._receiver = server
        task_status.started()
        await server.serve(sockets=[sock])

    # -- lifecycle ----------------------------------------------------------------------------
    def server_argv(self, callback_url: str, *, kubeconfig: str | None = None, kubectl: str | None = None,
                    python: str = sys.executable) -> list[str]:
        argv = [python, "-m", "sregym.agentplane.server", "--kubeconfig", kubeconfig or str(self.agent_kubeconfig),
                "--namespace", self.namespace, "--steps", str(self.budgets.steps), "--seconds",
                str(self.budgets.seconds), "--output-limit", str(self.output_limit), "--callback-url", callback_url]
        for flag, value in (("--prometheus-url", self.prometheus_url), ("--traces-url", self.traces_url),
                            ("--logs-url", self.logs_url), ("--kubectl", kubectl or self.kubectl)):
            if value:
                argv += [flag, value]
        return argv

    async def __aenter__(self) -> AgentPlane:
        if not self.agent_kubeconfig.is_file():
            raise PrerequisiteError(f"agent kubeconfig {self.agent_kubeconfig} does not exist",
                                    hint="create it with sregym.cluster.agent_access.create_agent_access")
        if self.kubectl is None and self.sandbox is None:
            from sregym.cluster.kube import kubectl_path

            self.kubectl = kubectl_path()
        self._stack = AsyncExitStack()
        await self._stack.__aenter__()
        try:
            await self._start()
        except BaseException:
            await self._stack.__aexit__(*sys.exc_info())
            raise
        return self

    async def _start(self) -> None:
        assert self._stack is not None
        if self.sandbox is not None:
            await self._start_in_sandbox(self.sandbox)
            return
        sock = listen()
        callback_url = "http://127.0.0.1:%d" % sock.getsockname()[1]
        tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.push_async_callback(self._stop_receiver)
        await tg.start(self._serve_receiver, sock)
        home = str(make_scratch_dir("sre-tools-home-"))  # swept by `sregym cleanup` if the conductor is killed
        self._stack.callback(shutil.rmtree, home, True)
        log_dir = self.log_dir or Path(home)
        log_dir.mkdir(parents=True, exist_ok=True)
        self.server_log = log_dir / "mcp-server.log"
        stderr = open(self.server_log, "ab")
        self._stack.callback(stderr.close)
        self._proc = await anyio.open_process(self.server_argv(callback_url), stdin=subprocess.DEVNULL,
                                              stdout=subprocess.PIPE, stderr=stderr, cwd=home,
                                              env=server_environment(self._token, home, self.mcp_token),
                                              start_new_session=True)
        self.server_pid = self._proc.pid
        self._stack.push_async_callback(self._stop_server)
        self.mcp_url = await self._wait_ready()

    async def _start_in_sandbox(self, sandbox: Sandbox) -> None:
        """The tool server as a pod of the run's sandbox namespace; the receiver on an address pods reach."""
        assert self._stack is not None
        from sregym.agentplane.sandbox import local_address_for_pods

        host = sandbox.callback_host or await anyio.to_thread.run_sync(local_address_for_pods, sandbox.kube)
        sandbox.callback_host = host
        sock = listen(host)
        callback_url = "http://%s:%d" % (host, sock.getsockname()[1])
        tg = await self._stack.enter_async_context(anyio.create_task_group())
        self._stack.push_async_callback(self._stop_receiver)
        await tg.start(self._serve_receiver, sock)
        self._stack.push_async_callback(self._close_sandbox)
        urls = [u for u in (self.prometheus_url, self.traces_url, self.logs_url) if u]
        await anyio.to_thread.run_sync(sandbox.open, sock.getsockname()[1], urls)
        argv = self.server_argv(callback_url, kubeconfig=f"{SECRET_DIR}/kubeconfig", kubectl="/usr/local/bin/kubectl",
                                python="python3") + ["--host", "0.0.0.0", "--port", str(SERVER_PORT)]
        # the server's own clock starts when it does; the pod may live a little longer to report
        deadline = self.budgets.seconds + GRACE_SECONDS + STARTUP_TIMEOUT
        await anyio.to_thread.run_sync(lambda: sandbox.start_pod(
            SERVER_POD, "tools", argv, secret_data={"kubeconfig": sandbox.pod_kubeconfig, CALLBACK_TOKEN_ENV: self._token,
                                     MCP_TOKEN_ENV: self.mcp_token},
            env={"LANG": "C.UTF-8"}, secret_env=[CALLBACK_TOKEN_ENV, MCP_TOKEN_ENV], deadline_seconds=deadline, port=SERVER_PORT))
        ip = await anyio.to_thread.run_sync(sandbox.wait_ready, SERVER_POD)
        self.mcp_url = f"http://{ip}:{SERVER_PORT}{MCP_PATH}"

    async def _close_sandbox(self) -> None:
        sandbox = self.sandbox
        if sandbox is None:
            return
        with anyio.CancelScope(shield=True):
            if self.log_dir is not None and sandbox.created:  # the server's log, as the host server keeps it
                self.log_dir.mkdir(parents=True, exist_ok=True)
                tail = await anyio.to_thread.run_sync(sandbox.log_tail, SERVER_POD)
                (self.log_dir / "mcp-server.log").write_text(tail)
            await anyio.to_thread.run_sync(sandbox.close)

    async def _wait_ready(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        buf = b""
        with anyio.move_on_after(STARTUP_TIMEOUT):
            async for chunk in self._proc.stdout:
                buf += chunk
                for line in buf.decode(errors="replace").splitlines():
                    if line.startswith(READY_PREFIX):
                        return line[len(READY_PREFIX):].strip()
        raise PrerequisiteError(f"the MCP tool server did not start within {STARTUP_TIMEOUT:g}s",
                                hint=f"see its log: {self.server_log}")

    async def _stop_server(self) -> None:
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        with anyio.CancelScope(shield=True):
            try:
                os.killpg(proc.pid, signal.SIGTERM)  # our own child's group: started with a new session
            except ProcessLookupError:
                return
            with anyio.move_on_after(5):
                await proc.wait()
                return
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            await proc.wait()

    async def _stop_receiver(self) -> None:
        receiver = getattr(self, "_receiver", None)
        if receiver is not None:
            receiver.should_exit = True

    async def __aexit__(self, *exc: Any) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            await stack.__aexit__(*exc)

    # -- the run ------------------------------------------------------------------------------
    def task(self, prompt: str, seed: int) -> AgentTask:
        """The task handed to an agent; the agent phase's clock starts here."""
        if self.mcp_url is None:
            raise RuntimeError("the agent plane is not open (use `async with AgentPlane(...)`)")
        task = AgentTask(mcp_url=self.mcp_url, kubeconfig=self.agent_kubeconfig, namespace=self.namespace,
                         prompt=prompt, budgets=self.budgets, seed=seed, prometheus_url=self.prometheus_url,
                         traces_url=self.traces_url, logs_url=self.logs_url, mcp_token=self.mcp_token,
                         sandbox=self.sandbox)
        self.started_at = task.started_at
        self.prompt = prompt
        return task

    async def run_agent(self, agent: Agent, task: AgentTask) -> AgentResult:
        """Run ``agent`` within the time budget (plus a short grace); a late agent is cancelled."""
        limit = max(0.0, self.budgets.seconds - task.elapsed()) + GRACE_SECONDS
        with anyio.move_on_after(limit) as scope:
            result = await agent.run(task)
        if scope.cancelled_caught:
            return AgentResult(stop_reason="budget_seconds", error=f"cancelled after the {self.budgets.seconds:g}s budget")
        return result

    def trajectory(self, result: AgentResult | None = None) -> Trajectory:
        """Everything recorded so far, with times relative to the start of the agent phase."""
        origin = self.started_at or min((e.at for e in self.tool_calls), default=0.0)
        calls = [recorded_call(e, origin) for e in sorted(self.tool_calls, key=lambda e: e.at)]
        subs = [Submission(kind=s.kind, t=round(s.at - origin, 3), text=s.text, fields=s.fields)
                for s in sorted(self.submissions, key=lambda s: s.at)]
        stop = "submitted" if self.mitigation_submitted.is_set() else (result.stop_reason if result else None)
        return Trajectory(prompt=self.prompt, tool_calls=calls, model_turns=list(result.model_turns) if result else [],
                          submissions=subs, stop_reason=stop)
