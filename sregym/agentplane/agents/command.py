"""``command``: any external agent (a coding-agent CLI, a script) as a subprocess.

It gets the MCP URL, its kubeconfig and the task, and nothing else from our environment:

- environment: ``PATH``, ``LANG``, ``HOME`` (a fresh empty directory, so ``~/.kube/config`` of the
  host is not found), ``SREGYM_MCP_URL`` and ``SREGYM_MCP_TOKEN`` (send it as
  ``Authorization: Bearer ...``), ``KUBECONFIG`` (the agent's), ``SREGYM_PROMPT_FILE``,
  ``SREGYM_NAMESPACE``, the raw observability URLs when present (``SREGYM_PROMETHEUS_URL``,
  ``SREGYM_TRACES_URL``, ``SREGYM_LOGS_URL``), and only the variables named in ``pass_env``
  (e.g. the agent's own API key);
- stdin: the prompt; working directory: the fresh directory;
- a wall-time limit, after which its process group is killed by PID.

It must submit through the MCP server (``submit_diagnosis``, ``submit_mitigation``).
Isolation note: a process of the same Unix user can read what that user can read on the host;
pass ``run_as`` (a user name) when sregym runs as root so the agent runs unprivileged.
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

from sregym.agentplane.access_token import MCP_TOKEN_ENV
from sregym.agentplane.agents.base import AGENTS, Agent, AgentResult, AgentTask
from sregym.core.errors import UserInputError

TAIL_CHARS = 2000
COMMAND_ENV = "SREGYM_AGENT_COMMAND"


def agent_environment(task: AgentTask, home: Path, kubeconfig: Path, prompt_file: Path,
                      pass_env: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """The whole environment of the external agent."""
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": os.environ.get("LANG", "C.UTF-8"),
           "HOME": str(home), "SREGYM_MCP_URL": task.mcp_url, "KUBECONFIG": str(kubeconfig),
           "SREGYM_PROMPT_FILE": str(prompt_file), "SREGYM_NAMESPACE": task.namespace}
    for name, value in (("SREGYM_PROMETHEUS_URL", task.prometheus_url), ("SREGYM_TRACES_URL", task.traces_url),
                        ("SREGYM_LOGS_URL", task.logs_url), (MCP_TOKEN_ENV, task.mcp_token)):
        if value:
            env[name] = value
    for name in pass_env:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


@AGENTS.register("command")
class CommandAgent(Agent):
    """An external agent (any CLI or script) run as a subprocess with the MCP URL, its kubeconfig and the prompt.

    ``CommandAgent(command="my-agent --fast", timeout=600, pass_env=["OPENAI_API_KEY"])``."""

    kind = "external"

    def __init__(self, command: str | list[str] | None = None, timeout: float | None = None,
                 pass_env: list[str] | None = None, run_as: str | None = None) -> None:
        command = command if command is not None else os.environ.get(COMMAND_ENV, "")
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise UserInputError("the command agent needs a command",
                                 hint=f"set ${COMMAND_ENV}='my-agent ARGS' (or pass command= when building it)")
        if shutil.which(self.argv[0]) is None and not Path(self.argv[0]).is_file():
            raise UserInputError(f"agent command {self.argv[0]!r} not found on PATH")
        self.timeout = timeout
        self.pass_env = pass_env or []
        self.run_as = run_as

    async def run(self, task: AgentTask) -> AgentResult:
        limit = max(1.0, task.budgets.seconds - task.elapsed())
        if self.timeout:
            limit = min(limit, self.timeout)
        with tempfile.TemporaryDirectory(prefix="sre-agent-") as work:
            home = Path(work)
            kubeconfig = home / "kubeconfig"
            shutil.copyfile(task.kubeconfig, kubeconfig)
            prompt_file = home / "task.md"
            prompt_file.write_text(task.prompt)
            user = self._user(home)
            env = agent_environment(task, home, kubeconfig, prompt_file, self.pass_env)
            with open(home / "stdout.log", "wb") as out, open(home / "stderr.log", "wb") as err:
                proc = await anyio.open_process(self.argv, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=work,
                                                env=env, start_new_session=True, user=user)
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

    def _user(self, home: Path) -> str | None:
        if not self.run_as:
            return None
        try:
            entry = pwd.getpwnam(self.run_as)
        except KeyError:
            raise UserInputError(f"user {self.run_as!r} (--run-as) does not exist on this host") from None
        for path in [home, *home.iterdir()]:
            os.chown(path, entry.pw_uid, entry.pw_gid)
        return self.run_as


def _kill_group(pid: int) -> None:
    """Kill the agent's own process group (it was started in a new session, so pgid == pid)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
