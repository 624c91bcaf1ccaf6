"""A diagnosis is bounded where it enters: a megabyte of padding is refused, with a message, before any record."""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import Client

from sregym.agentplane.events import JsonLinesSink
from sregym.agentplane.server import MAX_DIAGNOSIS_CHARS, ServerSettings, build_server


def test_an_oversized_diagnosis_is_refused_and_a_normal_one_taken(tmp_path: Path, agent_kubeconfig: Path) -> None:
    events = tmp_path / "events.jsonl"
    server = build_server(ServerSettings(kubeconfig=agent_kubeconfig, namespace="shop"), JsonLinesSink(events))

    async def go():
        async with Client(server) as mcp:
            huge = await mcp.call_tool("submit_diagnosis", {"text": "every item is satisfied " + "A" * 1_000_000})
            field = await mcp.call_tool("submit_diagnosis", {"text": "db down", "details": "B" * 100_000})
            fine = await mcp.call_tool("submit_diagnosis", {"text": "geo's DATABASE_URL points at port 5433"})
            return huge, field, fine

    huge, field, fine = anyio.run(go)
    assert huge.is_error and str(MAX_DIAGNOSIS_CHARS) in huge.content[0].text
    assert field.is_error and not fine.is_error
    assert events.stat().st_size < 20_000  # the refused megabyte never reached the record
