"""stress-ng runs on a node: as a host-level process, or moved into a target container's cgroups."""

from __future__ import annotations

import shlex
from typing import Literal

from sregym.cluster.nodeagent import CLIENT_COMMS, NodeRunner
from sregym.core.constants import HIDDEN_NAMESPACE

WORK_DIR = f"/run/{HIDDEN_NAMESPACE}"
Resource = Literal["cpu", "memory", "io"]


def stress_argv(resource: Resource, workers: int, load: int, memory: str, seconds: float | None, token: str,
                keep_oom_score: bool = False) -> list[str]:
    """stress-ng's command line; ``--temp-path`` names a per-fault directory (and lets recover find it).

    Memory workers hold their memory (``--vm-hang 0``) rather than rewrite it forever: the pressure
    is the memory, not a CPU-bound loop beside it. ``keep_oom_score`` stops stress-ng from making
    its workers the OOM killer's first choice (the node's default score is kept; lowering a score
    needs CAP_SYS_RESOURCE, which sandboxed nodes such as this VM's do not grant)."""
    argv = ["stress-ng", "--temp-path", f"{WORK_DIR}/{token}", "--quiet"]
    if keep_oom_score:
        argv.append("--no-oom-adjust")
    if resource == "cpu":
        argv += ["--cpu", str(workers), "--cpu-load", str(load)]
    elif resource == "memory":
        argv += ["--vm", str(workers), "--vm-bytes", memory, "--vm-keep", "--vm-hang", "0"]
    else:
        argv += ["--hdd", str(workers), "--hdd-bytes", memory, "--iomix", "1"] if workers > 1 else \
            ["--hdd", str(workers), "--hdd-bytes", memory]
    if seconds:
        argv += ["--timeout", f"{int(seconds)}s"]
    return argv


def cgroup_files(runner: NodeRunner, pid: int) -> list[str]:
    """``cgroup.procs`` files of every hierarchy ``pid`` belongs to (v1 controllers and v2)."""
    lines = runner.run(["cat", f"/proc/{pid}/cgroup"]).stdout.splitlines()
    out = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base = "/sys/fs/cgroup/unified" if runner.run(["test", "-d", runner.host_path("/sys/fs/cgroup/unified")],
                                                        check=False).returncode == 0 else "/sys/fs/cgroup"
        elif controllers.startswith("name="):
            base = f"/sys/fs/cgroup/{controllers[5:]}"
        else:
            base = f"/sys/fs/cgroup/{controllers}"
        out.append(runner.host_path(f"{base}{path}/cgroup.procs"))
    return out


def start_in_cgroups(runner: NodeRunner, argv: list[str], procs_files: list[str], log: str) -> None:
    """Start ``argv`` detached after moving its shell into the given cgroups (its children inherit them)."""
    moves = "".join(f"echo $$ > {shlex.quote(f)} 2>/dev/null; " for f in procs_files)
    script = f"{moves}exec {shlex.join(argv)}"
    # the log's directory too: where it is missing the redirection fails and nothing starts
    dirs = shlex.join([log.rsplit("/", 1)[0], argv[2]])
    runner.run(["sh", "-c", f"mkdir -p {dirs} && setsid sh -c {shlex.quote(script)} >{shlex.quote(log)} 2>&1 "
                            "</dev/null &"])


# Sums utime+stime of the processes whose command line holds a token and of their children
# (stress-ng renames its workers, so they no longer carry the token themselves); the scan's own
# client is left out, as in ``pids_with_cmdline``.
_TICKS = r"""
import os, sys
procs = {}
for d in os.listdir('/proc'):
    if d.isdigit() and d != str(os.getpid()):
        try:
            cmd = open(f'/proc/{d}/cmdline', 'rb').read().decode(errors='replace')
            stat = open(f'/proc/{d}/stat').read()
        except OSError:
            continue
        f = stat.rsplit(')', 1)[1].split()
        client = stat[stat.index('(') + 1:stat.rindex(')')] in sys.argv[2:]
        procs[int(d)] = (sys.argv[1] in cmd and not client, int(f[1]), int(f[11]) + int(f[12]))
roots = {p for p, (mine, _, _) in procs.items() if mine}
print(sum(t for p, (mine, ppid, t) in procs.items() if p in roots or ppid in roots))
"""


def cpu_ticks(runner: NodeRunner, token: str) -> int:
    """CPU ticks (utime+stime) used so far by one stress run, workers included."""
    out = runner.run(["python3", "-c", _TICKS, token, *CLIENT_COMMS], check=False).stdout.strip()
    return int(out) if out.isdigit() else 0
