"""How trace and log query results are shaped for a model (pure functions over API payloads)."""

from __future__ import annotations

import pytest

from sregym.agentplane.observability import parse_timestamped_log, summarize_traces

PROCESSES = {"p1": {"serviceName": "frontend"}, "p2": {"serviceName": "geo"}}


def span(span_id: str, process: str, start: int, duration: int, tags: dict | None = None) -> dict:
    return {"spanID": span_id, "processID": process, "operationName": f"op-{span_id}", "startTime": start,
            "duration": duration, "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]}


TRACES = [
    {"traceID": "t-ok", "processes": PROCESSES,
     "spans": [span("a", "p1", 1_000_000, 5_000), span("b", "p2", 1_001_000, 2_000)]},
    {"traceID": "t-err", "processes": PROCESSES,
     "spans": [span("c", "p1", 2_000_000, 40_000, {"http.status_code": 500}),
               span("d", "p2", 2_000_500, 39_000, {"error": True})]},
]


def test_traces_are_summarised_with_root_duration_services_and_errors() -> None:
    out = summarize_traces(TRACES)
    assert out["count"] == 2
    ok, err = out["traces"]
    assert ok["root"]["operation"] == "op-a" and ok["duration_ms"] == 5.0 and ok["services"] == ["frontend", "geo"]
    assert ok["error_spans"] == [] and ok["start"] == 1.0
    assert [s["service"] for s in err["error_spans"]] == ["frontend", "geo"]
    assert err["error_spans"][0]["http.status_code"] == 500


def test_errors_only_and_limit_filter_traces() -> None:
    assert [t["trace_id"] for t in summarize_traces(TRACES, errors_only=True)["traces"]] == ["t-err"]
    assert summarize_traces(TRACES, limit=1)["count"] == 1


def test_timestamped_log_lines_parse_nanosecond_stamps_and_continuations() -> None:
    raw = ("2023-11-14T22:13:20.123456789Z GET /search 200\n"
           "2023-11-14T22:13:21Z panic: boom\n"
           "\tgoroutine 1 [running]\n")
    rows = parse_timestamped_log(raw)
    assert [r[1] for r in rows] == ["GET /search 200", "panic: boom\n\tgoroutine 1 [running]"]
    assert rows[0][0] == pytest.approx(1_700_000_000.123456) and rows[1][0] == 1_700_000_001.0
