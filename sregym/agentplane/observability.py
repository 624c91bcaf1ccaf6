"""Queries behind the metrics, logs and traces tools, each against a public, well-known API.

- metrics: the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``)
- traces: the Jaeger query API (``/api/services``, ``/api/traces``)
- logs: the cluster's log query service (``GET /query``, charts/observability/images/log-query) when
  its URL is given, otherwise the Kubernetes API itself (pod logs read with the agent's own
  kubeconfig), which is what ``kubectl logs`` reads too.

Results are compacted for a model's context window: series, points, traces and lines are capped
and the result says what was cut.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from sregym.agentplane.timeparse import parse_duration, parse_time

MAX_SERIES = 30
MAX_POINTS = 60
MAX_TRACES = 20
MAX_LOG_LINES = 500


class QueryError(RuntimeError):
    """The backend refused or failed the query; the message is for the agent."""


def _get_json(client: httpx.Client, url: str, params: dict[str, Any], what: str) -> Any:
    try:
        response = client.get(url, params=params)
    except httpx.HTTPError as e:
        raise QueryError(f"{what} is not reachable: {e}") from None
    try:
        body = response.json()
    except ValueError:
        raise QueryError(f"{what} answered HTTP {response.status_code}: {response.text[:300]}") from None
    if response.status_code >= 400:
        detail = body.get("error") if isinstance(body, dict) else None
        raise QueryError(f"{what} refused the query (HTTP {response.status_code}): {detail or response.text[:300]}")
    return body


def _downsample(values: list[Any], limit: int) -> list[Any]:
    if len(values) <= limit:
        return values
    stride = len(values) / limit
    return [values[int(i * stride)] for i in range(limit - 1)] + [values[-1]]


def query_metrics(base_url: str, query: str, start: str | None = None, end: str | None = None,
                  step: str | None = None, *, timeout: float = 30.0) -> dict[str, Any]:
    """PromQL: an instant query when ``start`` is None, else a range query."""
    with httpx.Client(timeout=timeout) as client:
        if start is None:
            params: dict[str, Any] = {"query": query}
            if end is not None:
                params["time"] = parse_time(end)
            body = _get_json(client, f"{base_url.rstrip('/')}/api/v1/query", params, "Prometheus")
        else:
            t0, t1 = parse_time(start), parse_time(end)
            if t1 <= t0:
                raise QueryError("end must be after start")
            step_s = parse_duration(step) if step else max(1.0, round((t1 - t0) / MAX_POINTS))
            body = _get_json(client, f"{base_url.rstrip('/')}/api/v1/query_range",
                             {"query": query, "start": t0, "end": t1, "step": step_s}, "Prometheus")
    if body.get("status") != "success":
        raise QueryError(f"Prometheus: {body.get('errorType', 'error')}: {body.get('error', body)}")
    data = body.get("data", {})
    kind, result = data.get("resultType"), data.get("result", [])
    if kind in ("scalar", "string"):
        return {"result_type": kind, "value": result, "series": [], "truncated": False}
    series = []
    for item in result[:MAX_SERIES]:
        entry: dict[str, Any] = {"metric": item.get("metric", {})}
        if "values" in item:
            entry["values"] = _downsample(item["values"], MAX_POINTS)
        else:
            entry["value"] = item.get("value")
        series.append(entry)
    out: dict[str, Any] = {"result_type": kind, "series": series, "truncated": len(result) > MAX_SERIES}
    if out["truncated"]:
        out["note"] = f"showing {MAX_SERIES} of {len(result)} series; aggregate (sum by, topk) to see all"
    return out


def _span_summary(span: dict[str, Any], processes: dict[str, Any]) -> dict[str, Any]:
    tags = {t.get("key"): t.get("value") for t in span.get("tags", [])}
    service = processes.get(span.get("processID"), {}).get("serviceName", "?")
    summary = {"service": service, "operation": span.get("operationName"),
               "duration_ms": round(span.get("duration", 0) / 1000, 3)}
    pod = {t.get("key"): t.get("value") for t in processes.get(span.get("processID"), {}).get("tags", [])}
    if pod.get("k8s.pod.name"):  # the pod that sent it, as the trace store found it
        summary["pod"] = pod["k8s.pod.name"]
    for key in ("http.status_code", "rpc.grpc.status_code", "otel.status_code", "error.message", "error"):
        if key in tags:
            summary[key] = tags[key]
    messages = [f.get("value") for log in span.get("logs", []) for f in log.get("fields", [])
                if f.get("key") in ("message", "event", "error.object")]
    if messages:
        summary["events"] = messages[:3]
    return summary


def _is_error(span: dict[str, Any]) -> bool:
    for tag in span.get("tags", []):
        key, value = tag.get("key"), tag.get("value")
        if key == "error" and value in (True, "true"):
            return True
        if key == "otel.status_code" and value == "ERROR":
            return True
        if key == "http.status_code" and isinstance(value, int) and value >= 500:
            return True
    return False


SENT_FROM = "k8s.namespace.name"  # stamped by the trace store from the sender's address, not claimed


def query_traces(base_url: str, service: str, operation: str | None = None, start: str | None = None,
                 end: str | None = None, errors_only: bool = False, limit: int = 10, *,
                 namespace: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Recent traces of ``service`` from a Jaeger-compatible query API, summarised per trace. With
    ``namespace``, only traces in which a span of ``service`` was sent from a pod of that namespace
    (the trace store says who sent each span: charts/observability/images/trace-store)."""
    t1 = parse_time(end)
    t0 = parse_time(start, default=t1 - 900)
    limit = max(1, min(limit, MAX_TRACES))
    params: dict[str, Any] = {"service": service, "start": int(t0 * 1e6), "end": int(t1 * 1e6),
                              "limit": limit * (5 if errors_only else 1)}
    if operation:
        params["operation"] = operation
    scope = {SENT_FROM: namespace} if namespace else {}
    if errors_only or scope:
        params["tags"] = json.dumps({**scope, **({"error": "true"} if errors_only else {})})
    base = base_url.rstrip("/")
    with httpx.Client(timeout=timeout) as client:
        body = _get_json(client, f"{base}/api/traces", params, "the trace store")
        traces = body.get("data") or []
        if not traces and body.get("errors") is None:
            listed = {"tags": json.dumps(scope)} if scope else {}
            services = _get_json(client, f"{base}/api/services", listed, "the trace store").get("data") or []
            if service not in services:
                where = f" in namespace {namespace!r}" if namespace else ""
                raise QueryError(f"no traces for service {service!r}{where}; services with traces{where}: "
                                 f"{', '.join(sorted(services))}")
    return {"service": service, **summarize_traces(traces, errors_only=errors_only, limit=limit)}


def summarize_traces(traces: list[dict[str, Any]], *, errors_only: bool = False, limit: int = 10) -> dict[str, Any]:
    """One line of facts per Jaeger trace: root span, duration, services, error spans."""
    summaries = []
    for trace in traces:
        spans, processes = trace.get("spans", []), trace.get("processes", {})
        errors = [s for s in spans if _is_error(s)]
        if errors_only and not errors:
            continue
        root = min(spans, key=lambda s: s.get("startTime", 0)) if spans else {}
        begin = root.get("startTime", 0)
        finish = max((s.get("startTime", 0) + s.get("duration", 0) for s in spans), default=begin)
        summaries.append({
            "trace_id": trace.get("traceID"),
            "root": _span_summary(root, processes) if root else None,
            "start": begin / 1e6 if root else None,
            "duration_ms": round((finish - begin) / 1000, 3),
            "spans": len(spans),
            "services": sorted({processes.get(s.get("processID"), {}).get("serviceName", "?") for s in spans}),
            "error_spans": [_span_summary(s, processes) for s in errors[:5]],
        })
        if len(summaries) >= limit:
            break
    return {"traces": summaries, "count": len(summaries)}


def _text_matches(line: str, text: str | None) -> bool:
    return text is None or text.lower() in line.lower()


def query_log_service(base_url: str, namespace: str, pod: str | None = None, container: str | None = None,
                      since: str | None = None, until: str | None = None, text: str | None = None,
                      limit: int = 200, *, timeout: float = 30.0) -> dict[str, Any]:
    """Log lines from the cluster's log query service (``GET /query``, charts/observability), newest first."""
    t1 = parse_time(until)
    t0 = parse_time(since, default=t1 - 3600)
    limit = max(1, min(limit, MAX_LOG_LINES))
    params: dict[str, Any] = {"namespace": namespace, "since": t0, "until": t1, "limit": limit}
    for key, value in (("pod", pod), ("container", container), ("text", text)):
        if value:
            params[key] = value
    with httpx.Client(timeout=timeout) as client:
        body = _get_json(client, f"{base_url.rstrip('/')}/query", params, "the log service")
    lines = [{"ts": row.get("time"), "pod": row.get("pod"), "container": row.get("container"), "line": row.get("line")}
             for row in body.get("lines", [])]
    lines.sort(key=lambda x: x["ts"] or 0, reverse=True)
    out: dict[str, Any] = {"lines": lines[:limit], "count": min(len(lines), limit), "source": "log service"}
    if body.get("truncated"):
        out["note"] = f"showing the newest {limit} matching lines; narrow by pod, text or time"
    return out


def can_read_logs(kubeconfig: str, namespace: str) -> bool:
    """Whether the agent's own RBAC lets it read pod logs in ``namespace`` (a SelfSubjectAccessReview).

    The log service reads every node's log files and knows no RBAC, so the tool asks the API server
    first: the agent reads through it exactly the logs ``kubectl logs`` would show it."""
    from kubernetes import client, config

    api = client.AuthorizationV1Api(config.new_client_from_config(config_file=kubeconfig))
    review = api.create_self_subject_access_review(client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
        resource_attributes=client.V1ResourceAttributes(namespace=namespace, verb="get", resource="pods",
                                                        subresource="log"))))
    return bool(review.status.allowed)


def parse_timestamped_log(raw: str) -> list[tuple[float, str]]:
    """Lines of ``kubectl logs --timestamps`` output (RFC 3339 nanosecond stamps) as (unix time, text)."""
    rows = []
    for row in raw.splitlines():
        stamp, _, line = row.partition(" ")
        if stamp.endswith("Z"):
            date, _, frac = stamp[:-1].partition(".")
            stamp = f"{date}.{frac[:6]}+00:00" if frac else f"{date}+00:00"
        try:
            rows.append((parse_time(stamp), line))
        except ValueError:
            if rows:  # a continuation without a stamp belongs to the line before
                rows[-1] = (rows[-1][0], rows[-1][1] + "\n" + row)
    return rows


def query_kube_logs(kubeconfig: str, namespace: str, pod: str | None = None, container: str | None = None,
                    since: str | None = None, until: str | None = None, text: str | None = None,
                    limit: int = 200) -> dict[str, Any]:
    """Log lines read through the Kubernetes API with the agent's kubeconfig (blocking)."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    now = time.time()
    t1 = parse_time(until, now=now)
    t0 = parse_time(since, default=t1 - 3600, now=now)
    limit = max(1, min(limit, MAX_LOG_LINES))
    api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
    try:
        pods = api.list_namespaced_pod(namespace).items
    except ApiException as e:
        raise QueryError(f"cannot list pods in namespace {namespace!r}: {e.reason} (HTTP {e.status})") from None
    if pod:
        pods = [p for p in pods if p.metadata.name == pod] or [p for p in pods if p.metadata.name.startswith(pod)]
        if not pods:
            raise QueryError(f"no pod named {pod!r} (or starting with it) in namespace {namespace!r}")
    since_seconds = max(1, int(now - t0) + 1)
    lines: list[dict[str, Any]] = []
    errors: list[str] = []
    for p in pods:
        names = [c.name for c in (p.spec.containers or [])]
        for c in [container] if container else names:
            if c not in names:
                continue
            try:
                raw = api.read_namespaced_pod_log(p.metadata.name, namespace, container=c, timestamps=True,
                                                  since_seconds=since_seconds, tail_lines=5000)
            except ApiException as e:
                errors.append(f"{p.metadata.name}/{c}: {e.reason}")
                continue
            for ts, line in parse_timestamped_log(raw):
                if t0 <= ts <= t1 and _text_matches(line, text):
                    lines.append({"ts": ts, "pod": p.metadata.name, "container": c, "line": line})
    lines.sort(key=lambda x: x["ts"], reverse=True)
    out: dict[str, Any] = {"lines": lines[:limit], "count": min(len(lines), limit), "source": "kubernetes api"}
    if len(lines) > limit:
        out["note"] = f"showing the newest {limit} of {len(lines)} matching lines"
    if errors:
        out["errors"] = errors[:10]
    return out
