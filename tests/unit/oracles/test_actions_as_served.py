"""Through the real tool server: what the grader reads from the record is what kubectl received.

A stand-in kubectl writes down the arguments and stdin it was given. Each call goes through the MCP
server as an agent makes it; the server's events become the trajectory, as in a run. For every
call kubectl ran, the grader's reading of the record (the shared grammar) must give exactly the
arguments and stdin kubectl got, and the wrong remediations must name what those touched.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp import Client

from sregym.agentplane.events import JsonLinesSink, ToolCallEvent
from sregym.agentplane.plane import recorded_call
from sregym.agentplane.server import ServerSettings, build_server
from sregym.core.kubectl_args import MAX_COMMAND_CHARS, parse_kubectl
from sregym.core.problem import GroundTruth
from sregym.core.trajectory import Trajectory
from sregym.oracles._actions import wrong_remediations

GT = GroundTruth(root_cause="geo's DATABASE_URL points at the wrong port", component="geo",
                 mechanism="misconfigured env var", scope=["geo"])
PADDED_CONFIG = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "geo-config"},
                            "data": {"pad": "x" * 6000}})
FRONTEND = json.dumps({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "frontend"},
                       "spec": {"replicas": 0}})


@pytest.fixture()
def fake_kubectl(tmp_path: Path) -> Path:
    """Records argv (after --kubeconfig PATH) and stdin, one JSON line a call; exits 1 when told to fail."""
    path = tmp_path / "kubectl"
    path.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        args = sys.argv[3:]
        stdin = sys.stdin.read()
        with open({str(tmp_path / "ran.jsonl")!r}, "a") as f:
            f.write(json.dumps({{"args": args, "stdin": stdin}}) + "\\n")
        print("done")
        sys.exit(1 if "nope" in args else 0)
        """))
    path.chmod(0o755)
    return path


def serve(tmp_path: Path, kubectl: Path, calls: list[dict]) -> tuple[Trajectory, list[dict]]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    events = tmp_path / "events.jsonl"
    server = build_server(ServerSettings(kubeconfig=kubeconfig, namespace="hotel", kubectl=str(kubectl)),
                          JsonLinesSink(events))

    async def go() -> None:
        async with Client(server) as mcp:
            for arguments in calls:
                await mcp.call_tool("kubectl", arguments)

    anyio.run(go)
    recorded = [ToolCallEvent.model_validate_json(line) for line in events.read_text().splitlines()]
    ran_file = tmp_path / "ran.jsonl"
    ran = [json.loads(line) for line in ran_file.read_text().splitlines()] if ran_file.exists() else []
    return Trajectory(tool_calls=[recorded_call(e, recorded[0].at) for e in recorded]), ran


def test_the_grader_reads_exactly_what_kubectl_received(tmp_path: Path, fake_kubectl: Path) -> None:
    calls = [
        {"command": "-nhotel delete deploy -- frontend"},
        {"command": ["rollout", "restart", "deploy/frontend", "--field-manager", "history"]},
        {"command": "delete pods -lapp!=geo --grace-period 0"},
        {"command": "delete deploy frontend nope"},                                      # exit 1, frontend gone
        {"command": "delete deploy frontend", "args": ["rollout", "restart", "deploy/geo"]},  # args: ignored
        {"command": json.dumps(["delete", "deploy", "frontend"])},  # the SDK decodes JSON in a string to a list
        {"command": "apply -f -", "stdin": PADDED_CONFIG + "\n" + FRONTEND},             # frontend after 6000 chars
        {"command": "scale deploy geo " + " " * 5000 + "--replicas=2"},                   # long, but allowed
        {"command": "set env deploy/geo DATABASE_URL=postgres://db:5432"},
        {"command": "apply -f -", "stdin": json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                                                       "metadata": {"name": "geo"}})},  # JSON: kept as text
    ]
    trajectory, ran = serve(tmp_path, fake_kubectl, calls)
    assert len(ran) == len(calls) and not any(c.invalid for c in trajectory.tool_calls)
    for call, executed in zip(trajectory.tool_calls, ran):
        read = parse_kubectl(call.arguments["command"], stdin=call.arguments.get("stdin"))
        assert list(read.args) == executed["args"]
        assert (call.arguments.get("stdin") or "") == executed["stdin"]
    wrong = wrong_remediations(trajectory, GT)
    assert len(wrong) == len(calls) - 3, wrong  # every call but the three on geo
    assert all("frontend" in w or "(touches *)" in w for w in wrong), wrong


def test_a_call_too_long_to_record_whole_is_refused_not_run(tmp_path: Path, fake_kubectl: Path) -> None:
    trajectory, ran = serve(tmp_path, fake_kubectl, [
        {"command": "delete deploy frontend " + "-v=0 " * (MAX_COMMAND_CHARS // 5 + 1)}])
    assert ran == [] and trajectory.tool_calls[0].invalid
    assert wrong_remediations(trajectory, GT) == []
