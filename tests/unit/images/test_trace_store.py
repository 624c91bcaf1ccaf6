"""The trace store's OTLP decoding and Jaeger-API answers (pure logic, no sockets)."""

import importlib.util
import sys
import json
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_PATH = Path(__file__).resolve().parents[3] / "charts/observability/images/trace-store/tracestore.py"
_spec = importlib.util.spec_from_file_location("sregym_tracestore", _PATH)
ts = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ts  # dataclasses look their module up
_spec.loader.exec_module(ts)

TRACE = "5b8efff798038103d269b633813fc60c"
T0 = 1_700_000_000_000_000_000  # ns


def otlp_json(service="frontend", span_id="eee19b7ec3c1b174", parent="", name="GET /search", error=False,
              start_ns=T0, dur_ns=250_000_000, attrs=None):
    span = {"traceId": TRACE, "spanId": span_id, "name": name, "kind": 2,
            "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(start_ns + dur_ns),
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (attrs or {}).items()],
            "status": {"code": 2, "message": "boom"} if error else {}}
    if parent:
        span["parentSpanId"] = parent
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}},
                                    {"key": "host.name", "value": {"stringValue": "pod-1"}}]},
        "scopeSpans": [{"scope": {"name": "svckit"}, "spans": [span]}]}]}


def store_with_two_services():
    store = ts.TraceStore()
    store.add(ts.spans_from_request(ts.parse_request(json.dumps(otlp_json()).encode(), "application/json")))
    child = otlp_json(service="search", span_id="00f067aa0ba902b7", parent="eee19b7ec3c1b174", name="nearby",
                      start_ns=T0 + 10_000_000, dur_ns=50_000_000, error=True, attrs={"http.route": "/nearby"})
    store.add(ts.spans_from_request(ts.parse_request(json.dumps(child).encode(), "application/json")))
    return store


def test_json_ids_are_hex_and_survive_decoding():
    store = store_with_two_services()
    trace = store.trace(TRACE)
    assert trace["traceID"] == TRACE
    assert {s["spanID"] for s in trace["spans"]} == {"eee19b7ec3c1b174", "00f067aa0ba902b7"}
    child = next(s for s in trace["spans"] if s["operationName"] == "nearby")
    assert child["references"] == [{"refType": "CHILD_OF", "traceID": TRACE, "spanID": "eee19b7ec3c1b174"}]
    assert child["duration"] == 50_000 and child["startTime"] == T0 // 1000 + 10_000


def test_protobuf_body_decodes_like_json():
    request = ts.parse_request(json.dumps(otlp_json()).encode(), "application/json")
    again = ts.parse_request(request.SerializeToString(), "application/x-protobuf")
    assert isinstance(again, ExportTraceServiceRequest)
    assert ts.spans_from_request(again) == ts.spans_from_request(request)


def test_processes_are_listed_once_per_trace_with_service_names():
    trace = store_with_two_services().trace(TRACE)
    assert sorted(p["serviceName"] for p in trace["processes"].values()) == ["frontend", "search"]
    assert all(s["processID"] in trace["processes"] for s in trace["spans"])


def test_services_and_operations_endpoints():
    store = store_with_two_services()
    assert ts.query(store, "/api/services", {})[1]["data"] == ["frontend", "search"]
    assert ts.query(store, "/api/services/search/operations", {})[1]["data"] == ["nearby"]
    ops = ts.query(store, "/api/operations", {"service": ["frontend"]})[1]["data"]
    assert ops == [{"name": "GET /search", "spanKind": "server"}]


def test_find_traces_by_service_time_tags_and_duration():
    store = store_with_two_services()
    start, end = str(T0 // 1000 - 1), str(T0 // 1000 + 1_000_000)
    hit = ts.query(store, "/api/traces", {"service": ["search"], "start": [start], "end": [end],
                                          "tags": ['{"error":"true"}']})[1]["data"]
    assert [t["traceID"] for t in hit] == [TRACE]
    assert ts.query(store, "/api/traces", {"service": ["frontend"], "start": [start], "end": [end],
                                           "tags": ['{"error":"true"}']})[1]["data"] == []
    assert ts.query(store, "/api/traces", {"service": ["search"], "start": [start], "end": [end],
                                           "tag": ["http.route:/nearby"], "minDuration": ["40ms"]})[1]["data"]
    assert ts.query(store, "/api/traces", {"service": ["search"], "start": [start], "end": [end],
                                           "minDuration": ["60ms"]})[1]["data"] == []
    # the window excludes spans that started before it
    assert ts.query(store, "/api/traces", {"service": ["frontend"], "start": [str(T0 // 1000 + 5)],
                                           "end": [end]})[1]["data"] == []


def test_unknown_trace_is_404_and_bad_duration_is_400():
    store = store_with_two_services()
    status, body = ts.query(store, "/api/traces/abcdef", {})
    assert status == 404 and body["errors"][0]["msg"] == "trace not found"
    status, body = ts.query(store, "/api/traces", {"minDuration": ["fast"]})
    assert status == 400


def test_dependencies_count_cross_service_calls():
    deps = store_with_two_services().dependencies(0, 2**62)
    assert deps == [{"parent": "frontend", "child": "search", "callCount": 1}]


def test_memory_is_bounded_by_evicting_oldest_traces():
    store = ts.TraceStore(max_spans=3)
    for i in range(5):
        body = otlp_json()
        body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = f"{i + 1:032x}"
        store.add(ts.spans_from_request(ts.parse_request(json.dumps(body).encode(), "application/json")))
    assert store.span_count == 3 and store.dropped == 2
    assert store.trace(f"{1:032x}") is None and store.trace(f"{5:032x}") is not None


def test_error_status_becomes_error_tag():
    child = next(s for s in store_with_two_services().trace(TRACE)["spans"] if s["operationName"] == "nearby")
    tags = {t["key"]: t["value"] for t in child["tags"]}
    assert tags["error"] is True and tags["otel.status_description"] == "boom" and tags["span.kind"] == "server"
