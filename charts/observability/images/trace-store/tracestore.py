"""A small trace store: OTLP/HTTP in, Jaeger's query API out, spans kept in a bounded memory.

Why not Jaeger itself: Jaeger v1.76's go.mod requires ~340 modules (the OpenTelemetry collector
and its contrib exporters, Kafka, Elasticsearch, Cassandra clients); compiling that on the
benchmark's 2 shared cores is out of proportion to what the agents use: the query API below.

Ingest (port OTLP_PORT, default 4318):
  POST /v1/traces   ExportTraceServiceRequest as protobuf (application/x-protobuf) or JSON
                    (application/json, OTLP's JSON mapping with hex trace and span ids), gzip allowed.
Query (port QUERY_PORT, default 16686), the subset of Jaeger's HTTP API its UI and clients use:
  GET /api/services
  GET /api/services/{service}/operations
  GET /api/operations?service=&spanKind=
  GET /api/traces?service=&operation=&start=&end=&lookback=&limit=&tags=&tag=&minDuration=&maxDuration=
  GET /api/traces/{traceID}
  GET /api/dependencies?endTs=&lookback=
Both ports also answer GET /healthz.

Memory is bounded by MAX_SPANS (default 200000): the oldest traces of the sender namespace holding
the most spans are dropped first.

Who sent a span is the store's to say, not the sender's: every span's process is stamped with the
namespace and pod of the address that posted it (`k8s.namespace.name`, `k8s.pod.name`, asked of the
API server by pod IP, cached briefly), and `sregym.sender` says "pod" or "unattributed". What the
sender claimed under those keys, where it differs, is kept as `claimed.<key>`. A sender that is no
single running pod (the node's address, which a post to the NodePort is masqueraded to; an address
the API does not know) gets no namespace, so a query scoped to a namespace never shows its spans.
With parallel cells sharing the store, an agent's pod cannot put spans in another cell's view.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import ssl
import threading
import time
import urllib.request
from collections import OrderedDict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple
from urllib.parse import parse_qs, quote, unquote, urlparse

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

ATTRIBUTED = ("k8s.namespace.name", "k8s.pod.name")
SENDER_KEY = "sregym.sender"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SPAN_KINDS = {0: "", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
_ID_FIELDS = {"traceId", "spanId", "parentSpanId"}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(us|µs|ms|s|m|h)$")
_UNITS_US = {"us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}


# ---------------------------------------------------------------- OTLP -> internal spans

def _hex_ids_to_base64(node):
    """OTLP JSON carries ids as hex; protobuf's JSON mapping expects base64 for bytes fields."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str) and value and re.fullmatch(r"[0-9a-fA-F]+", value):
                out[key] = base64.b64encode(bytes.fromhex(value)).decode()
            else:
                out[key] = _hex_ids_to_base64(value)
        return out
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


def parse_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """Decode an OTLP/HTTP export body (protobuf or JSON)."""
    request = ExportTraceServiceRequest()
    if "json" in content_type:
        json_format.ParseDict(_hex_ids_to_base64(json.loads(body or b"{}")), request, ignore_unknown_fields=True)
    else:
        request.ParseFromString(body)
    return request


def _any_value(value):
    """(jaeger type, python value) of an OTLP AnyValue."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return "string", value.string_value
    if which == "bool_value":
        return "bool", value.bool_value
    if which == "int_value":
        return "int64", value.int_value
    if which == "double_value":
        return "float64", value.double_value
    if which == "bytes_value":
        return "binary", base64.b64encode(value.bytes_value).decode()
    if which in ("array_value", "kvlist_value"):
        return "string", json_format.MessageToJson(getattr(value, which), indent=None)
    return "string", ""


def _tags(attributes) -> list[dict]:
    tags = []
    for kv in attributes:
        kind, value = _any_value(kv.value)
        tags.append({"key": kv.key, "type": kind, "value": value})
    return tags


# ---------------------------------------------------------------- who sent it

class Sender(NamedTuple):
    namespace: str
    pod: str


class PodDirectory:
    """Which pod has an address: ``lookup(ip)`` lists the pods the API server knows with that
    ``status.podIP``; the one running or pending pod not on the host's network is the sender.
    Answers are kept ``ttl`` seconds (a pod's address is not handed to another pod that fast)."""

    def __init__(self, lookup: Callable[[str], list[dict]], ttl: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lookup, self.ttl, self.clock = lookup, ttl, clock
        self._cache: dict[str, tuple[float, Sender | None]] = {}
        self._lock = threading.Lock()
        self.errors = 0
        self.last_error = ""

    def who(self, address: str) -> Sender | None:
        ip = address.removeprefix("::ffff:")
        now = self.clock()
        with self._lock:
            hit = self._cache.get(ip)
        if hit and now - hit[0] < self.ttl:
            return hit[1]
        try:
            pods = [p for p in self.lookup(ip)
                    if not (p.get("spec") or {}).get("hostNetwork")
                    and (p.get("status") or {}).get("podIP") == ip
                    and (p.get("status") or {}).get("phase") in ("Running", "Pending")]
        except Exception as e:  # noqa: BLE001 - no answer names no pod; the error is counted and shown
            with self._lock:
                self.errors += 1
                self.last_error = f"{type(e).__name__}: {e}"[:300]
            return None
        sender = Sender(pods[0]["metadata"]["namespace"], pods[0]["metadata"]["name"]) if len(pods) == 1 else None
        with self._lock:
            self._cache[ip] = (now, sender)
        return sender


def api_pod_lookup() -> Callable[[str], list[dict]] | None:
    """Ask the API server, with the pod's own ServiceAccount, which pods have an address; None when
    not running in a cluster."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not os.path.exists(f"{SA_DIR}/token"):
        return None
    context = ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt")
    base = f"https://{host if ':' not in host else '[' + host + ']'}:{port}"

    def lookup(ip: str) -> list[dict]:
        with open(f"{SA_DIR}/token") as f:  # re-read: the kubelet rotates it
            token = f.read().strip()
        url = f"{base}/api/v1/pods?fieldSelector={quote('status.podIP=' + ip)}"
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return json.load(response).get("items") or []

    return lookup


def _stamped(process_tags: list[dict], sender: Sender | None) -> list[dict]:
    """The resource's tags with the sender's namespace and pod in place of what it claimed."""
    claimed = {t["key"]: t for t in process_tags if t["key"] in ATTRIBUTED}
    tags = [t for t in process_tags if t["key"] not in ATTRIBUTED and t["key"] != SENDER_KEY]
    actual = dict(zip(ATTRIBUTED, sender)) if sender else {}
    for key, tag in claimed.items():
        if actual.get(key) != tag["value"]:
            tags.append({**tag, "key": f"claimed.{key}"})
    tags += [{"key": k, "type": "string", "value": v} for k, v in actual.items()]
    tags.append({"key": SENDER_KEY, "type": "string", "value": "pod" if sender else "unattributed"})
    return tags


def spans_from_request(request: ExportTraceServiceRequest, sender: Sender | None = None) -> list[dict]:
    """Flatten an export request into Jaeger-shaped spans (each carrying its process), stamped with
    who sent it (``sender``: None for a sender that is no single pod)."""
    spans = []
    for resource_spans in request.resource_spans:
        process_tags = _stamped(_tags(resource_spans.resource.attributes), sender)
        service = next((t["value"] for t in process_tags if t["key"] == "service.name"), "unknown_service")
        process = {"serviceName": str(service), "tags": [t for t in process_tags if t["key"] != "service.name"]}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                tags = _tags(span.attributes)
                kind = SPAN_KINDS.get(span.kind, "")
                if kind:
                    tags.append({"key": "span.kind", "type": "string", "value": kind})
                if span.status.code == 2:  # STATUS_CODE_ERROR
                    tags.append({"key": "error", "type": "bool", "value": True})
                    tags.append({"key": "otel.status_code", "type": "string", "value": "ERROR"})
                    if span.status.message:
                        tags.append({"key": "otel.status_description", "type": "string",
                                     "value": span.status.message})
                if scope_spans.scope.name:
                    tags.append({"key": "otel.scope.name", "type": "string", "value": scope_spans.scope.name})
                references = []
                if span.parent_span_id:
                    references.append({"refType": "CHILD_OF", "traceID": trace_id,
                                       "spanID": span.parent_span_id.hex()})
                for link in span.links:
                    references.append({"refType": "FOLLOWS_FROM", "traceID": link.trace_id.hex(),
                                       "spanID": link.span_id.hex()})
                start_us = span.start_time_unix_nano // 1000
                logs = [{"timestamp": e.time_unix_nano // 1000,
                         "fields": [{"key": "event", "type": "string", "value": e.name}, *_tags(e.attributes)]}
                        for e in span.events]
                spans.append({
                    "traceID": trace_id,
                    "spanID": span_id,
                    "operationName": span.name,
                    "references": references,
                    "flags": 1,
                    "startTime": start_us,
                    "duration": max(0, (span.end_time_unix_nano - span.start_time_unix_nano) // 1000),
                    "tags": tags,
                    "logs": logs,
                    "process": process,
                    "kind": kind,
                })
    return spans


# ---------------------------------------------------------------- the store

def parse_duration_us(text: str) -> int:
    """Jaeger durations ("250ms", "1.5s", "300us", "2h") in microseconds."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"bad duration {text!r} (use e.g. 100ms, 1.5s, 2m)")
    return int(float(match.group(1)) * _UNITS_US[match.group(2)])


def parse_tag_filters(params: dict[str, list[str]]) -> dict[str, str]:
    """``tags={"k":"v"}`` (JSON) and ``tag=k:v`` (repeated) into one dict of string values."""
    wanted: dict[str, str] = {}
    for raw in params.get("tags", []):
        try:
            decoded = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"tags must be a JSON object: {e}") from None
        if not isinstance(decoded, dict):
            raise ValueError("tags must be a JSON object")
        wanted.update({str(k): _tag_text(v) for k, v in decoded.items()})
    for raw in params.get("tag", []):
        key, _, value = raw.partition(":")
        wanted[key] = value
    return wanted


def _tag_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _span_matches(span: dict, service: str | None, operation: str | None, tags: dict[str, str],
                  min_us: int | None, max_us: int | None) -> bool:
    if service and span["process"]["serviceName"] != service:
        return False
    if operation and span["operationName"] != operation:
        return False
    if min_us is not None and span["duration"] < min_us:
        return False
    if max_us is not None and span["duration"] > max_us:
        return False
    if tags:
        have = {t["key"]: _tag_text(t["value"]) for t in (*span["process"]["tags"], *span["tags"])}
        have["service.name"] = span["process"]["serviceName"]
        if any(have.get(k) != v for k, v in tags.items()):
            return False
    return True


def _sender_of(span: dict) -> str:
    """The namespace the store found for the span's sender ("" when none)."""
    return next((t["value"] for t in span["process"]["tags"] if t["key"] == ATTRIBUTED[0]), "")


class TraceStore:
    """Spans grouped by trace id, kept within ``max_spans``. When over it, the oldest trace of the
    sender namespace holding the most spans goes first: a pod that floods the store (an agent's, in
    a store parallel cells share) evicts its own namespace's traces before anyone else's."""

    def __init__(self, max_spans: int = 200_000) -> None:
        self.max_spans = max_spans
        self._traces: OrderedDict[str, list[dict]] = OrderedDict()
        self._count = 0
        self._held: dict[str, int] = {}  # sender namespace -> spans held
        self._order: dict[str, OrderedDict[str, None]] = {}  # sender namespace -> its trace ids, oldest first
        self._lock = threading.Lock()
        self.received = 0
        self.dropped = 0

    def add(self, spans: list[dict]) -> None:
        with self._lock:
            for span in spans:
                trace = self._traces.get(span["traceID"])
                if trace is None:
                    trace = self._traces[span["traceID"]] = []
                trace.append(span)
                sender = _sender_of(span)
                self._held[sender] = self._held.get(sender, 0) + 1
                self._order.setdefault(sender, OrderedDict())[span["traceID"]] = None
                self._count += 1
                self.received += 1
            while self._count > self.max_spans and self._traces:
                self._evict_one()

    def _evict_one(self) -> None:
        heaviest = max(self._held, key=lambda k: self._held[k])
        order = self._order[heaviest]
        trace_id = next(iter(order))
        evicted = self._traces.pop(trace_id)
        for span in evicted:
            sender = _sender_of(span)
            self._held[sender] -= 1
            self._order[sender].pop(trace_id, None)
            if not self._held[sender]:
                del self._held[sender], self._order[sender]
        self._count -= len(evicted)
        self.dropped += len(evicted)

    @property
    def span_count(self) -> int:
        return self._count

    def _snapshot(self) -> list[tuple[str, list[dict]]]:
        with self._lock:
            return [(tid, list(spans)) for tid, spans in self._traces.items()]

    def services(self, tags: dict[str, str] | None = None) -> list[str]:
        return sorted({s["process"]["serviceName"] for _, spans in self._snapshot() for s in spans
                       if _span_matches(s, None, None, tags or {}, None, None)})

    def operations(self, service: str, span_kind: str | None = None) -> list[dict]:
        found = {(s["operationName"], s["kind"]) for _, spans in self._snapshot() for s in spans
                 if s["process"]["serviceName"] == service and (not span_kind or s["kind"] == span_kind)}
        return [{"name": name, "spanKind": kind} for name, kind in sorted(found)]

    def trace(self, trace_id: str) -> dict | None:
        trace_id = trace_id.lower().rjust(32, "0")
        with self._lock:
            spans = list(self._traces.get(trace_id, ()))
        return to_jaeger_trace(trace_id, spans) if spans else None

    def find(self, *, service: str | None = None, operation: str | None = None, start_us: int | None = None,
             end_us: int | None = None, tags: dict[str, str] | None = None, min_us: int | None = None,
             max_us: int | None = None, limit: int = 20) -> list[dict]:
        """Traces with at least one span that matches every criterion, most recent first."""
        hits = []
        for trace_id, spans in self._snapshot():
            matched = [s for s in spans
                       if (start_us is None or s["startTime"] >= start_us)
                       and (end_us is None or s["startTime"] <= end_us)
                       and _span_matches(s, service, operation, tags or {}, min_us, max_us)]
            if matched:
                hits.append((max(s["startTime"] for s in spans), trace_id, spans))
        hits.sort(key=lambda h: h[0], reverse=True)
        return [to_jaeger_trace(tid, spans) for _, tid, spans in hits[:limit]]

    def dependencies(self, start_us: int, end_us: int) -> list[dict]:
        """Caller -> callee service pairs with call counts (parent span's service -> child's)."""
        counts: dict[tuple[str, str], int] = {}
        for _, spans in self._snapshot():
            by_id = {s["spanID"]: s for s in spans}
            for span in spans:
                if not start_us <= span["startTime"] <= end_us:
                    continue
                for ref in span["references"]:
                    parent = by_id.get(ref["spanID"]) if ref["refType"] == "CHILD_OF" else None
                    if parent and parent["process"]["serviceName"] != span["process"]["serviceName"]:
                        key = (parent["process"]["serviceName"], span["process"]["serviceName"])
                        counts[key] = counts.get(key, 0) + 1
        return [{"parent": p, "child": c, "callCount": n} for (p, c), n in sorted(counts.items())]


def to_jaeger_trace(trace_id: str, spans: list[dict]) -> dict:
    """Jaeger's trace JSON: spans refer to processes ``p1..pN`` listed once per trace."""
    processes: dict[str, dict] = {}
    keys: dict[str, str] = {}
    out = []
    for span in sorted(spans, key=lambda s: s["startTime"]):
        fingerprint = json.dumps(span["process"], sort_keys=True)
        if fingerprint not in keys:
            keys[fingerprint] = f"p{len(keys) + 1}"
            processes[keys[fingerprint]] = span["process"]
        body = {k: v for k, v in span.items() if k not in ("process", "kind")}
        body.update(processID=keys[fingerprint], warnings=None)
        out.append(body)
    return {"traceID": trace_id, "spans": out, "processes": processes, "warnings": None}


# ---------------------------------------------------------------- HTTP

def envelope(data, status: int = 200, error: str | None = None) -> tuple[int, dict]:
    body = {"data": data, "total": len(data) if isinstance(data, list) else 0, "limit": 0, "offset": 0,
            "errors": [{"code": status, "msg": error}] if error else None}
    return status, body


def query(store: TraceStore, path: str, params: dict[str, list[str]], now_us: int | None = None) -> tuple[int, dict]:
    """Answer one Jaeger API GET (pure: no sockets), as (status, JSON body)."""
    now_us = now_us if now_us is not None else int(time.time() * 1_000_000)

    def one(name: str) -> str | None:
        values = params.get(name)
        return values[0] if values and values[0] != "" else None

    try:
        if path == "/api/services":  # tags/tag: an extension of Jaeger's API (e.g. one namespace's)
            return envelope(store.services(parse_tag_filters(params)))
        match = re.fullmatch(r"/api/services/([^/]+)/operations", path)
        if match:
            return envelope(sorted({o["name"] for o in store.operations(unquote(match.group(1)))}))
        if path == "/api/operations":
            service = one("service")
            if not service:
                return envelope(None, 400, "parameter 'service' is required")
            return envelope(store.operations(service, one("spanKind")))
        match = re.fullmatch(r"/api/traces/([0-9a-fA-F]{1,32})", path)
        if match:
            trace = store.trace(match.group(1))
            return envelope([trace]) if trace else envelope(None, 404, "trace not found")
        if path == "/api/traces":
            end_us = int(one("end") or now_us)
            lookback = one("lookback")
            start = one("start")
            if start is not None:
                start_us = int(start)
            elif lookback and lookback != "custom":
                start_us = end_us - parse_duration_us(lookback)
            else:
                start_us = end_us - 3_600_000_000  # Jaeger's default lookback: 1h
            min_d, max_d = one("minDuration"), one("maxDuration")
            traces = store.find(service=one("service"), operation=one("operation"), start_us=start_us,
                                end_us=end_us, tags=parse_tag_filters(params),
                                min_us=parse_duration_us(min_d) if min_d else None,
                                max_us=parse_duration_us(max_d) if max_d else None,
                                limit=int(one("limit") or 20))
            return envelope(traces)
        if path == "/api/dependencies":
            end_us = int(one("endTs") or now_us // 1000) * 1000
            lookback_ms = int(one("lookback") or 3_600_000)
            return envelope(store.dependencies(end_us - lookback_ms * 1000, end_us))
    except ValueError as e:
        return envelope(None, 400, str(e))
    return envelope(None, 404, f"no such endpoint {path}")


class Handler(BaseHTTPRequestHandler):
    store: TraceStore  # set on the subclass made by serve()
    directory: PodDirectory | None = None  # None: not in a cluster, no sender is attributed
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # one line per request would drown the pod log
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        if url.path in ("/healthz", "/"):
            d = self.directory
            health = {"spans": self.store.span_count, "received": self.store.received, "dropped": self.store.dropped,
                      "attribution": "off (not in a cluster)" if d is None else
                      {"lookup_errors": d.errors, "last_error": d.last_error}}
            self._send(200, json.dumps(health).encode(), "application/json")
            return
        status, body = query(self.store, url.path.rstrip("/") or "/", parse_qs(url.query))
        self._send(status, json.dumps(body).encode(), "application/json")

    def do_POST(self):  # noqa: N802
        url = urlparse(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if url.path != "/v1/traces":
            self._send(404, b'{"error":"POST /v1/traces only"}', "application/json")
            return
        content_type = self.headers.get("Content-Type", "application/x-protobuf")
        try:
            if self.headers.get("Content-Encoding", "") == "gzip":
                body = gzip.decompress(body)
            request = parse_request(body, content_type)
            sender = self.directory.who(self.client_address[0]) if self.directory else None
            self.store.add(spans_from_request(request, sender))
        except Exception as e:  # noqa: BLE001 - any undecodable body is the client's error
            self._send(400, json.dumps({"code": 3, "message": f"cannot decode OTLP request: {e}"}).encode(),
                       "application/json")
            return
        if "json" in content_type:
            self._send(200, b"{}", "application/json")
        else:
            self._send(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")


def serve(store: TraceStore, ports: list[int], host: str = "0.0.0.0",
          directory: PodDirectory | None = None) -> list[ThreadingHTTPServer]:
    handler = type("BoundHandler", (Handler,), {"store": store, "directory": directory})
    servers = []
    for port in ports:
        server = ThreadingHTTPServer((host, port), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    return servers


def main() -> None:
    store = TraceStore(int(os.environ.get("MAX_SPANS", "200000")))
    ports = [int(os.environ.get("OTLP_PORT", "4318")), int(os.environ.get("QUERY_PORT", "16686"))]
    lookup = api_pod_lookup()
    serve(store, ports, directory=PodDirectory(lookup) if lookup else None)
    print(json.dumps({"msg": "trace store listening", "ports": ports, "max_spans": store.max_spans,
                      "attribution": "by pod address" if lookup else "off (not in a cluster)"}), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
