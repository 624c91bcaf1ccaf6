"""Start and stop the local cluster's daemons by path and PID (there is no systemd here).

Each daemon runs in its own session, writes to ``logs/<name>.log`` and has ``pids/<name>.pid``.
A PID is trusted only while ``/proc/<pid>/exe`` still points at the binary we started, so a
recycled PID is never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from sregym.cluster.local.paths import LocalPaths, private_dir


@dataclass
class Daemon:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def binary(self) -> str:
        return self.argv[0]


def _exe_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return None


def _is_zombie(pid: int) -> bool:
    """A zombie has stopped running; only its parent has yet to reap it (this machine's PID 1
    reaps orphans only every few seconds, so a killed orphan lingers as a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def running(pid: int) -> bool:
    """Whether ``pid`` names a process that still runs (a zombie does not)."""
    return Path(f"/proc/{pid}").exists() and not _is_zombie(pid)


def read_pid(paths: LocalPaths, name: str) -> tuple[int, str] | None:
    """(pid, binary) recorded for ``name``, if any."""
    try:
        pid_s, _, binary = paths.pidfile(name).read_text().partition("\n")
        return int(pid_s), binary.strip()
    except (OSError, ValueError):
        return None


def running_pid(paths: LocalPaths, name: str) -> int | None:
    """The PID of ``name`` if it is alive and still the binary we started."""
    rec = read_pid(paths, name)
    if rec is None:
        return None
    pid, binary = rec
    exe = _exe_of(pid)
    if exe is None or _is_zombie(pid):
        return None
    if binary and os.path.realpath(binary) != os.path.realpath(exe):
        return None
    return pid


def start(paths: LocalPaths, daemon: Daemon) -> int:
    private_dir(paths.logs)  # the control plane's logs name what the fault plane does (its pods, the edits)
    paths.pids.mkdir(parents=True, exist_ok=True)
    log = open(paths.log(daemon.name), "ab", buffering=0)
    log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(daemon.argv)}\n".encode())
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
           **daemon.env}
    proc = subprocess.Popen(daemon.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env, close_fds=True)
    log.close()
    paths.pidfile(daemon.name).write_text(f"{proc.pid}\n{os.path.realpath(daemon.binary)}\n")
    return proc.pid


def stop(paths: LocalPaths, name: str, *, timeout: float = 20.0) -> bool:
    """SIGTERM then SIGKILL the daemon by PID; True if something was stopped."""
    pid = running_pid(paths, name)
    paths.pidfile(name).unlink(missing_ok=True)
    if pid is None:
        return False
    signal_and_wait(pid, timeout)
    return True


def signal_and_wait(pid: int, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _exe_of(pid) is None or _is_zombie(pid):
            _reap(pid)
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    for _ in range(50):
        if _exe_of(pid) is None or _is_zombie(pid):
            break
        time.sleep(0.1)
    _reap(pid)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def pids_with_arg(binary_suffix: str, arg: str) -> list[int]:
    """PIDs whose executable ends with ``binary_suffix`` and whose argv contains ``arg``.

    Used to find containerd shims that serve *our* containerd socket (they outlive containerd),
    identified by their ``-address`` argument; they are then stopped by PID."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        exe = _exe_of(int(entry.name))
        if not exe or not exe.endswith(binary_suffix):
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if arg.encode() in argv:
            found.append(int(entry.name))
    return found
