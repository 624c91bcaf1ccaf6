"""The trace tool reads only spans sent from its own namespace's pods: with parallel cells sharing one
trace store, another cell's spans (its app's, or the ones its agent makes up under this app's service
names) never reach this cell's agent. Against the real trace store module, served over HTTP here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from sregym.agentplane import observability as obs
from sregym.agentplane.events import JsonLinesSink
from sregym.agentplane.server import ServerSettings, build_server

_PATH = Path(__file__).resolve().parents[3] / "charts/observability/images/trace-store/tracestore.py"
_spec = importlib.util.spec_from_file_location("sregym_tracestore_scoped", _PATH)
ts = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ts
_spec.loader.exec_module(ts)


def export(service: str, trace_id: str, claims: dict[str, str]) -> bytes:
    attrs = {"service.name": service, **claims}
    now = 1_800_000_000_000_000_000
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]},
        "scopeSpans": [{"spans": [{"traceId": trace_id, "spanId": trace_id[:16], "name": "GET /search", "kind": 2,
                                   "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 9_000_000),
                                   "status": {"code": 2}}]}]}]}).encode()


@pytest.fixture
def store_url():
    """A trace store holding a span of 'search' from each cell's namespace, and one the other cell's
    agent posted claiming this cell's namespace (stamped with its own)."""
    store = ts.TraceStore()
    for trace, body, sender in (
            ("a" * 32, export("search", "a" * 32, {"k8s.namespace.name": "hotel"}), ts.Sender("hotel", "search-1")),
            ("b" * 32, export("search", "b" * 32, {"k8s.namespace.name": "hotel-p1"}), ts.Sender("hotel-p1", "search-2")),
            ("c" * 32, export("search", "c" * 32, {"k8s.namespace.name": "hotel"}), ts.Sender("hotel-p1", "fake-3")),
            ("d" * 32, export("ghost", "d" * 32, {"k8s.namespace.name": "hotel"}), None)):
        store.add(ts.spans_from_request(ts.parse_request(body, "application/json"), sender))
    [server] = ts.serve(store, [0], host="127.0.0.1")
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def trace_ids(result: dict) -> set[str]:
    return {t["trace_id"] for t in result["traces"]}


def test_the_backend_query_keeps_to_the_namespace(store_url) -> None:
    window = {"start": "1799999990", "end": "1800000010"}
    assert trace_ids(obs.query_traces(store_url, "search", namespace="hotel", **window)) == {"a" * 32}
    assert trace_ids(obs.query_traces(store_url, "search", namespace="hotel-p1", **window)) == {"b" * 32, "c" * 32}
    assert len(trace_ids(obs.query_traces(store_url, "search", **window))) == 3  # unscoped: the conductor's
    scoped = obs.query_traces(store_url, "search", namespace="hotel", errors_only=True, **window)
    assert trace_ids(scoped) == {"a" * 32} and scoped["traces"][0]["root"]["pod"] == "search-1"
    with pytest.raises(obs.QueryError, match="in namespace 'hotel'; services with traces in namespace 'hotel': search$"):
        obs.query_traces(store_url, "ghost", namespace="hotel", **window)


def test_the_agents_tool_reads_its_own_namespace_only(store_url, tmp_path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    server = build_server(ServerSettings(kubeconfig=kubeconfig, namespace="hotel", traces_url=store_url),
                          JsonLinesSink(tmp_path / "events.jsonl"))

    async def go():
        async with Client(server) as mcp:
            return await mcp.call_tool("query_traces", {"service": "search", "start": "1799999990",
                                                        "end": "1800000010"})

    result = anyio.run(go)
    assert not result.is_error, result.content[0].text
    assert trace_ids(result.structured_content) == {"a" * 32}
