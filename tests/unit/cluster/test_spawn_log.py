"""``spawn``'s log: emptied for the new process, then written in append mode, so an older process
still writing the same log (a file server serving held descriptors) adds its lines after the new
one's instead of over them at its own offset. Run for real with sh on this host."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from sregym.cluster.nodeagent import spawn


class HostRunner:
    def run(self, argv, check=True, timeout=None, **kw):
        return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=timeout)


def test_an_older_writer_of_the_log_never_overwrites_the_new_ones_lines(tmp_path: Path):
    log = tmp_path / "server.log"
    # the older server: has written a long line, then writes again after the new one started
    old_pid, _ = spawn(HostRunner(), ["sh", "-c", "echo an-old-line-longer-than-the-new-ones; sleep 1; echo old-late"],
                       log=str(log))
    time.sleep(0.3)
    new_pid, _ = spawn(HostRunner(), ["sh", "-c", "echo serving; echo pass-through; sleep 2"], log=str(log))
    time.sleep(1.5)
    text = log.read_text()
    assert "\0" not in text, repr(text)
    lines = text.splitlines()
    assert lines[:2] == ["serving", "pass-through"] and "old-late" in lines, lines
    for pid in (old_pid, new_pid):
        subprocess.run(["kill", str(pid)], capture_output=True)
