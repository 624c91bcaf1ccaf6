"""kubectl's output is capped while it is read: past the cap the tool stops reading and kills that kubectl.

A stand-in kubectl prints without end (``yes``), to stdout or to stderr; without the cap the call would
run until the timeout with its output piling up in memory. Through the real server and the official client.
"""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from sregym.agentplane.events import JsonLinesSink
from sregym.agentplane.server import ServerSettings, build_server, run_capped, truncate
from procfs import ended

LIMIT = 2000


@pytest.fixture()
def fake_kubectl(tmp_path: Path) -> Path:
    """Prints forever to stdout for `get`, to stderr for `describe`, 300 bytes for `version`; writes its PID."""
    path = tmp_path / "kubectl"
    path.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo $$ > {tmp_path}/pid
        case "$3" in
          get) exec yes "pod-0   1/1   Running   0   5m" ;;
          describe) exec yes "I1125 round_trippers.go: GET https://api/... 200 OK" >&2 ;;
          *) head -c 300 /dev/zero | tr '\\0' x ;;
        esac
        """))
    path.chmod(0o755)
    return path


def call(tmp_path: Path, kubectl: Path, command: str) -> tuple[object, float, int]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    settings = ServerSettings(kubeconfig=kubeconfig, namespace="shop", output_limit=LIMIT, kubectl_timeout=30,
                              kubectl=str(kubectl))
    server = build_server(settings, JsonLinesSink(tmp_path / "events.jsonl"))

    async def go():
        async with Client(server) as mcp:
            started = time.monotonic()
            result = await mcp.call_tool("kubectl", {"command": command})
            return result, time.monotonic() - started

    result, took = anyio.run(go)
    return result, took, int((tmp_path / "pid").read_text())


def gone(pid: int) -> bool:
    return ended(pid)


@pytest.mark.parametrize("command, stream", [("get pods", "stdout"), ("describe pods", "stderr")])
def test_endless_output_is_cut_at_the_cap_and_kubectl_is_killed(tmp_path: Path, fake_kubectl: Path,
                                                                command: str, stream: str) -> None:
    result, took, pid = call(tmp_path, fake_kubectl, command)
    assert took < 10, "the tool kept reading past the cap"
    text = result.structured_content["output"]
    assert result.structured_content["truncated"] is True and not result.is_error
    assert f"kubectl's {stream} passed {LIMIT} characters" in text and "narrow the query" in text
    assert len(text) < LIMIT + 400
    assert gone(pid)


def test_short_output_is_whole_and_not_marked_cut(tmp_path: Path, fake_kubectl: Path) -> None:
    result, _, _ = call(tmp_path, fake_kubectl, "version")
    assert result.structured_content == {"verb": "version", "exit_code": 0, "output": "x" * 300, "truncated": False}


def test_memory_held_never_passes_the_cap(tmp_path: Path) -> None:
    """run_capped itself: however fast kubectl writes, each buffer stops at the cap."""
    argv = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536); sys.stderr.write('y' * 9)"]
    started = time.monotonic()
    done = anyio.run(run_capped, argv, None, str(tmp_path), 30.0, 10_000)
    assert time.monotonic() - started < 10
    assert len(done.stdout) == 10_000 and len(done.stderr) <= 10_000
    assert done.cut == ("stdout",) and done.returncode == -9  # killed by the cap, not waited out


def test_truncate_keeps_short_text_and_says_how_much_was_cut() -> None:
    assert truncate("abc", 10) == ("abc", False)
    text, cut = truncate("x" * 1000, 100)
    assert cut and text.startswith("x" * 100) and "showed 100 of 1000 characters" in text
    assert len(text) < 400
