"""Logs, metrics and traces, set up once per process."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import Counter, Gauge, Histogram

from svckit import config

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HTTP_REQUESTS = Counter("http_server_requests_total", "Requests served", ["service", "route", "method", "code"])
HTTP_LATENCY = Histogram("http_server_request_duration_seconds", "Time to serve a request",
                         ["service", "route"], buckets=LATENCY_BUCKETS)
HTTP_INFLIGHT = Gauge("http_server_requests_in_flight", "Requests being served", ["service"])
CALLS = Counter("http_client_requests_total", "Calls to other services", ["service", "target", "outcome"])
CALL_LATENCY = Histogram("http_client_request_duration_seconds", "Time of calls to other services",
                         ["service", "target"], buckets=LATENCY_BUCKETS)
CALL_RETRIES = Counter("http_client_retries_total", "Retried calls to other services", ["service", "target"])
DEPENDENCY_UP = Gauge("dependency_up", "1 when the last readiness check of a dependency passed",
                      ["service", "dependency"])
DEPENDENCY_ERRORS = Counter("dependency_errors_total", "Failed operations on a data store or queue",
                            ["service", "dependency", "operation"])
POOL_SIZE = Gauge("db_pool_connections", "Database pool connections", ["service", "state"])
POOL_MAX = Gauge("db_pool_max_connections", "Configured pool size", ["service"])
CACHE_OPS = Counter("cache_operations_total", "Cache lookups", ["service", "cache", "result"])


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the request id and trace id of the current request."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "msg": record.getMessage(),
        }
        rid = request_id.get()
        if rid:
            entry["request_id"] = rid
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            entry["trace_id"] = format(ctx.trace_id, "032x")
        entry.update(getattr(record, "fields", {}) or {})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(entry, default=str)


def setup(service: str) -> logging.Logger:
    """Configure JSON logging and tracing for ``service``; return its logger."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.text("LOG_LEVEL", "INFO").upper())
    for noisy in ("aiohttp.access", "opentelemetry"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    endpoint = config.text("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
    if endpoint:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=5)))
    trace.set_tracer_provider(provider)
    return logging.getLogger(service)


def log(logger: logging.Logger, level: int, msg: str, **fields) -> None:
    """Log ``msg`` with structured ``fields``."""
    logger.log(level, msg, extra={"fields": fields})
