"""``command``: any external agent (a coding-agent CLI, a script), run in the run's sandbox pod.

By default the command runs as a pod of the run's sandbox namespace (see
:mod:`sregym.agentplane.sandbox`), from the workbench image or the user's own image (``image``,
``--agent-image``; it starts ``FROM`` the workbench image), as a non-root user on a read-only root
file system, where none of the conductor's files, processes or credentials exist. It gets:

- environment: ``LANG``, ``HOME`` (an empty scratch directory), ``SREGYM_MCP_URL`` and
  ``SREGYM_MCP_TOKEN`` (send it as ``Authorization: Bearer ...``; in the Secret), ``KUBECONFIG``
  (the agent's), ``SREGYM_PROMPT_FILE``, ``SREGYM_NAMESPACE``, and the variables named in
  ``pass_env`` (e.g. the agent's own API key; they travel in a Secret, never on a command line);
- stdin: the prompt;
- the network: the API endpoint of its kubeconfig, the tool server, and the model endpoints
  named with ``egress`` (``--agent-egress CIDR:PORT``); not Prometheus or the log store (the
  grader's: the agent queries them through the tools);
- a wall-time limit: the pod's ``activeDeadlineSeconds``, and the conductor deletes it at the limit.

Its exit code and the tail of its output go into the result. It must submit through the MCP server.

``host=True`` (``--agent-host``) runs the command on the conductor's host instead, only as an
unprivileged user (``run_as``, ``--run-as USER``): never as root, because root there reads the
journal, the problems and the admin kubeconfig.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import anyio
import anyio.to_thread

from sregym.agentplane.access_token import MCP_TOKEN_ENV
from sregym.agentplane.agents.base import Agent, AgentResult, AgentTask, agent
from sregym.agentplane.sandbox import AGENT_POD, HOME_DIR, KUBECONFIG_KEY, PROMPT_KEY, SECRET_DIR, parse_egress
from sregym.core.errors import PrerequisiteError, UserInputError

TAIL_CHARS = 2000
COMMAND_ENV = "SREGYM_AGENT_COMMAND"
# stdin is the prompt, as on the host; "$@" is the user's command, never re-parsed by the shell
_STDIN_WRAPPER = ["/bin/sh", "-c", 'exec "$@" < "$SREGYM_PROMPT_FILE"', "agent"]


def agent_environment(task: AgentTask, home: Path | str, kubeconfig: Path | str, prompt_file: Path | str,
                      pass_env: list[str] | tuple[str, ...] = (), *, host: bool = True) -> dict[str, str]:
    """The whole environment of the external agent (``pass_env`` values included on the host only:
    in the sandbox they come from its Secret)."""
    env = {"LANG": os.environ.get("LANG", "C.UTF-8") if host else "C.UTF-8", "HOME": str(home),
           "SREGYM_MCP_URL": task.mcp_url, "KUBECONFIG": str(kubeconfig), "SREGYM_PROMPT_FILE": str(prompt_file),
           "SREGYM_NAMESPACE": task.namespace}
    if host:
        env["PATH"] = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        # on the host the raw observability URLs stay as documented before the sandbox; a sandboxed
        # agent cannot reach them (they serve the grader's whole view) and is not told them
        for name, value in (("SREGYM_PROMETHEUS_URL", task.prometheus_url), ("SREGYM_TRACES_URL", task.traces_url),
                            ("SREGYM_LOGS_URL", task.logs_url)):
            if value:
                env[name] = value
        for name in pass_env:
            if name in os.environ:
                env[name] = os.environ[name]
        if task.mcp_token:
            env[MCP_TOKEN_ENV] = task.mcp_token
    return env


@agent("command")
class CommandAgent(Agent):
    """An external agent (any CLI or script) with the MCP URL, its kubeconfig and the prompt.

    ``CommandAgent(command="my-agent --fast", timeout=600, pass_env=["OPENAI_API_KEY"],
    image="sregym/my-agent:latest", egress=["10.244.0.1:8000"])`` runs it in the sandbox;
    ``host=True, run_as="agent"`` on this host as that (non-root) user."""

    kind = "external"

    def __init__(self, command: str | list[str] | None = None, timeout: float | None = None,
                 pass_env: list[str] | None = None, run_as: str | None = None, *, image: str | None = None,
                 egress: list[str] | None = None, host: bool = False) -> None:
        command = command if command is not None else os.environ.get(COMMAND_ENV, "")
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise UserInputError("the command agent needs a command",
                                 hint=f"set ${COMMAND_ENV}='my-agent ARGS' (or pass command= when building it)")
        self.timeout = timeout
        self.pass_env = pass_env or []
        self.run_as = run_as
        self.host = host
        self.image = image
        self.egress = [parse_egress(e) for e in egress or []]
        if host:
            if image or egress:
                raise UserInputError("--agent-image and --agent-egress apply to the sandbox pod, not to --agent-host")
            self._host_user()  # refuse root before anything changes
            if shutil.which(self.argv[0]) is None and not Path(self.argv[0]).is_file():
                raise UserInputError(f"agent command {self.argv[0]!r} not found on PATH")
        elif run_as:
            raise UserInputError("--run-as applies only to an agent run on the host (--agent-host)",
                                 hint="in the sandbox pod the agent always runs as the image's non-root user")

    def _limit(self, task: AgentTask) -> float:
        limit = max(1.0, task.budgets.seconds - task.elapsed())
        return min(limit, self.timeout) if self.timeout else limit

    async def run(self, task: AgentTask) -> AgentResult:
        if self.host:
            return await self._run_on_host(task)
        if task.sandbox is None:
            raise PrerequisiteError("the command agent runs in the run's sandbox pod, and this agent plane has none",
                                    hint="open the plane with a Sandbox (the conductor does), or pass "
                                         "--agent-host --run-as USER to run it on this host")
        return await self._run_in_sandbox(task)

    # -- in the sandbox ---------------------------------------------------------------------------
    async def _run_in_sandbox(self, task: AgentTask) -> AgentResult:
        sandbox = task.sandbox
        limit = self._limit(task)
        missing = [n for n in self.pass_env if n not in os.environ]
        if missing:
            raise UserInputError(f"pass_env names {', '.join(missing)}, which this environment does not set")
        secret = {KUBECONFIG_KEY: sandbox.pod_kubeconfig, PROMPT_KEY: task.prompt,
                  **{name: os.environ[name] for name in self.pass_env}}
        secret_env = list(self.pass_env)
        if task.mcp_token:  # the tool server's bearer token, like the API key: in the Secret, never in argv
            secret[MCP_TOKEN_ENV] = task.mcp_token
            secret_env.append(MCP_TOKEN_ENV)
        env = agent_environment(task, HOME_DIR, f"{SECRET_DIR}/{KUBECONFIG_KEY}", f"{SECRET_DIR}/{PROMPT_KEY}",
                                host=False)
        await anyio.to_thread.run_sync(lambda: sandbox.start_pod(
            AGENT_POD, "agent", [*_STDIN_WRAPPER, *self.argv], secret_data=secret, env=env,
            secret_env=secret_env, deadline_seconds=limit + 5, image=self.image))
        try:
            outcome = await anyio.to_thread.run_sync(sandbox.wait_finished, AGENT_POD, limit, abandon_on_cancel=True)
        finally:
            with anyio.CancelScope(shield=True):  # cancelled by the plane's budget, or done: it must not go on
                await anyio.to_thread.run_sync(sandbox.delete_pod, AGENT_POD)
        tail = outcome.log_tail[-TAIL_CHARS:]
        if outcome.timed_out:
            return AgentResult(stop_reason="budget_seconds", error=f"stopped after {limit:.0f}s")
        if outcome.exit_code != 0:
            return AgentResult(stop_reason="error", error=f"{self.argv[0]} exited with {outcome.exit_code}"
                               f"{' (' + outcome.reason + ')' if outcome.reason else ''}: {tail.strip()[-500:]}")
        return AgentResult(stop_reason="submitted")

    # -- on the host (explicit, never root) -------------------------------------------------------
    def _host_user(self) -> pwd.struct_passwd | None:
        """The user the host command runs as; refuses uid 0 with the option to use."""
        if self.run_as:
            try:
                entry = pwd.getpwnam(self.run_as)
            except KeyError:
                raise UserInputError(f"user {self.run_as!r} (--run-as) does not exist on this host") from None
            if entry.pw_uid == 0:
                raise UserInputError(f"--run-as {self.run_as} is root (uid 0); the agent never runs as root",
                                     hint="name an unprivileged user, e.g. `useradd -m agent` then --run-as agent")
            return entry
        if os.geteuid() == 0:
            raise UserInputError("--agent-host would run the agent as root, which reads the journal, the problems "
                                 "and the admin kubeconfig", hint="add --run-as USER (an unprivileged user), or "
                                 "drop --agent-host to run it in the sandbox pod")
        return None

    async def _run_on_host(self, task: AgentTask) -> AgentResult:
        limit = self._limit(task)
        with tempfile.TemporaryDirectory(prefix="sre-agent-") as work:
            home = Path(work)
            kubeconfig = home / "kubeconfig"
            shutil.copyfile(task.kubeconfig, kubeconfig)
            prompt_file = home / "task.md"
            prompt_file.write_text(task.prompt)
            entry = self._host_user()
            if entry is not None:
                for path in [home, *home.iterdir()]:
                    os.chown(path, entry.pw_uid, entry.pw_gid)
            env = agent_environment(task, home, kubeconfig, prompt_file, self.pass_env)
            with open(home / "stdout.log", "wb") as out, open(home / "stderr.log", "wb") as err:
                proc = await anyio.open_process(self.argv, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=work,
                                                env=env, start_new_session=True,
                                                user=entry.pw_uid if entry else None,
                                                group=entry.pw_gid if entry else None,
                                                extra_groups=[] if entry else None)
                timed_out = False
                try:
                    with anyio.fail_after(limit):
                        if proc.stdin is not None:
                            try:
                                await proc.stdin.send(task.prompt.encode())
                            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                                pass  # the agent need not read stdin
                            await proc.stdin.aclose()
                        await proc.wait()
                except TimeoutError:
                    timed_out = True
                finally:
                    if proc.returncode is None:
                        _kill_group(proc.pid)
                        with anyio.CancelScope(shield=True):
                            await proc.wait()
            stderr_tail = (home / "stderr.log").read_text(errors="replace")[-TAIL_CHARS:]
        if timed_out:
            return AgentResult(stop_reason="budget_seconds", error=f"stopped after {limit:.0f}s")
        if proc.returncode != 0:
            return AgentResult(stop_reason="error",
                               error=f"{self.argv[0]} exited with {proc.returncode}: {stderr_tail.strip()[-500:]}")
        return AgentResult(stop_reason="submitted")


def _kill_group(pid: int) -> None:
    """Kill the agent's own process group (it was started in a new session, so pgid == pid)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
