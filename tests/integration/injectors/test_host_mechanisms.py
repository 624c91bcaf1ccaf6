"""The node-side mechanisms, run for real on this host (root, /dev/fuse, network namespaces)."""

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sregym.cluster.nodeagent import HostRunner, kill_spawned, pids_with_cmdline, spawn
from sregym.injectors import delayq, sectorfs
from sregym.injectors._netns import chain_script, unchain_script

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


@pytest.fixture
def private_mount_ns():
    """A process in its own mount namespace (like a container) and a data file it can see."""
    proc = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sleep", "120"])
    time.sleep(0.3)
    yield proc.pid
    proc.kill()
    proc.wait()


def mount_sector_fs(tmp_path: Path, pid: int, bad: str, token: str) -> tuple[Path, HostRunner, int, float]:
    """An 8-block file (block i holds byte i) served by sectorfs in ``pid``'s mount namespace with
    blocks ``bad`` failing EIO; waits until the mount shows. (data, runner, server pid, start)."""
    data = tmp_path / "blob"
    data.write_bytes(b"".join(bytes([i]) * 4096 for i in range(8)))
    runner = HostRunner("this-host")
    fs_pid, start = spawn(runner, [sys.executable, sectorfs.__file__, str(pid), str(data), "4096", bad, "EIO", token],
                          log=str(tmp_path / "log"))
    deadline = time.time() + 10
    while str(data) not in Path(f"/proc/{pid}/mounts").read_text() and time.time() < deadline:
        time.sleep(0.1)
    return data, runner, fs_pid, start


@pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse")
def test_sector_fs_fails_reads_of_bad_blocks_only_in_the_target_namespace(tmp_path, private_mount_ns):
    pid = private_mount_ns
    token = f"sfs-test-{os.getpid()}"
    data, runner, fs_pid, start = mount_sector_fs(tmp_path, pid, "2,5", token)
    try:
        view = f"/proc/{pid}/root{data}"
        fd = os.open(view, os.O_RDWR)
        assert os.pread(fd, 4096, 4096)[:1] == b"\x01"
        for bad in (2, 5):
            with pytest.raises(OSError) as e:
                os.pread(fd, 4096, bad * 4096)
            assert e.value.errno == errno.EIO
        assert data.read_bytes()[2 * 4096] == 2  # the host's view (the disk) is untouched
        os.pwrite(fd, b"z" * 4096, 2 * 4096)  # a full-block write remaps it, as dm-dust does
        assert os.pread(fd, 4096, 2 * 4096)[:1] == b"z"
        os.close(fd)
    finally:
        subprocess.run(["nsenter", "-t", str(pid), "-m", "--", "umount", "-l", str(data)], check=False)
        kill_spawned(runner, fs_pid, start)
    assert not pids_with_cmdline(runner, token)
    assert os.pread(os.open(f"/proc/{pid}/root{data}", os.O_RDONLY), 4096, 5 * 4096)[:1] == b"\x05"


@pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse")
def test_sector_fs_repaired_keeps_serving_open_descriptors_then_exits(tmp_path, private_mount_ns):
    """Recovery is a repaired disk: a process that opened the file through the mount (a database
    backend) reads every block again after SIGUSR1 and the lazy unmount, and the server exits once
    the last such descriptor closes (nothing left behind)."""
    pid = private_mount_ns
    token = f"sfs-repair-{os.getpid()}"
    data, runner, fs_pid, start = mount_sector_fs(tmp_path, pid, "2,3", token)
    try:
        fd = os.open(f"/proc/{pid}/root{data}", os.O_RDONLY)
        with pytest.raises(OSError) as e:  # a whole 8 KiB page bad: an I/O error, not a short read
            os.pread(fd, 8192, 2 * 4096)
        assert e.value.errno == errno.EIO
        os.kill(fs_pid, signal.SIGUSR1)
        deadline = time.time() + 5
        while "pass-through" not in (tmp_path / "log").read_text() and time.time() < deadline:
            time.sleep(0.1)
        assert os.pread(fd, 8192, 2 * 4096) == b"\x02" * 4096 + b"\x03" * 4096
        subprocess.run(["nsenter", "-t", str(pid), "-m", "--", "umount", "-l", str(data)], check=True)
        assert os.pread(fd, 4096, 3 * 4096)[:1] == b"\x03"  # the old descriptor still works
        assert pids_with_cmdline(runner, token), "the server left while a descriptor was open"
        os.close(fd)
        deadline = time.time() + 10
        while pids_with_cmdline(runner, token) and time.time() < deadline:
            time.sleep(0.2)
        assert not pids_with_cmdline(runner, token), "the server did not exit after the last descriptor closed"
    finally:
        subprocess.run(["nsenter", "-t", str(pid), "-m", "--", "umount", "-l", str(data)], check=False)
        kill_spawned(runner, fs_pid, start)


def _netns_python(code: str) -> str:
    return subprocess.run(["unshare", "-n", sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60).stdout


def test_delay_queue_adds_the_delay_and_packets_flow_when_it_stops():
    code = f"""
import socket, subprocess, sys, threading, time
subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)
srv = socket.socket(); srv.bind(('127.0.0.1', 9999)); srv.listen()
def serve():
    while True:
        c, _ = srv.accept(); c.recv(8); c.send(b'x'); c.close()
threading.Thread(target=serve, daemon=True).start()
def rtt():
    t = time.monotonic(); c = socket.create_connection(('127.0.0.1', 9999)); c.send(b'a'); c.recv(1); c.close()
    return (time.monotonic() - t) * 1000
q = subprocess.Popen([sys.executable, {delayq.__file__!r}, '9', '40', '0', '1'], stdout=subprocess.PIPE)
q.stdout.readline()
subprocess.run('iptables -w -A OUTPUT -p tcp --dport 9999 -j NFQUEUE --queue-num 9 --queue-bypass', shell=True, check=True)
delayed = min(rtt() for _ in range(3))
q.kill(); q.wait()
print(delayed, rtt())
"""
    delayed, after = map(float, _netns_python(code).split())
    assert delayed >= 75  # 40 ms on each of the two client-to-server round trips
    assert after < 20


def test_chain_scripts_add_and_remove_exactly_our_rules():
    add = chain_script("POD-TEST", ["OUTPUT", "INPUT"], ["-m statistic --mode random --probability 0.5 -j DROP"])
    rm = unchain_script("POD-TEST", ["OUTPUT", "INPUT"])
    script = f"{add} && {add} && iptables -w -S && echo --- && {rm}; {rm}; iptables -w -S"
    out = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=60).stdout
    during, after = out.split("---")
    assert during.count("-j POD-TEST") == 2  # hooked once per hook even when applied twice
    assert during.count("--probability 0.5") == 1
    assert "POD-TEST" not in after


def test_slow_disk_tracer_holds_each_fdatasync_for_the_delay(tmp_path):
    """slow_disk's strace line, attached to a running process as the node supervisor attaches it,
    holds every fdatasync for the delay and fails none; detached (SIGTERM), the calls are fast again."""
    from injectors.slow_disk import SlowDiskParams, delay_argv

    data, marks = tmp_path / "wal", tmp_path / "marks"
    child = subprocess.Popen([sys.executable, "-c", (
        "import os,sys,time\nfd=os.open(sys.argv[1],os.O_WRONLY|os.O_CREAT)\nout=open(sys.argv[2],'a')\n"
        "while True:\n t=time.monotonic(); os.write(fd,b'x'); os.fdatasync(fd)\n"
        " out.write(f'{time.monotonic()-t:.3f}\\n'); out.flush(); time.sleep(0.05)\n"), str(data), str(marks)])
    argv = delay_argv(SlowDiskParams(delay_ms=300), "hwtest")
    argv[argv.index("-o") + 1] = str(tmp_path / "trace")
    tracer = subprocess.Popen(argv + ["-p", str(child.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2.0)
        slow = [float(x) for x in marks.read_text().split()[-3:]]
        tracer.terminate()
        tracer.wait(10)
        n = len(marks.read_text().split())
        time.sleep(1.0)
        fast = [float(x) for x in marks.read_text().split()[n:]]
        assert len(slow) == 3 and all(s >= 0.29 for s in slow), slow
        assert fast and max(fast) < 0.2, fast  # detached: the disk is fast again
        assert child.poll() is None  # nothing failed
    finally:
        tracer.kill()
        child.kill()
        child.wait()
