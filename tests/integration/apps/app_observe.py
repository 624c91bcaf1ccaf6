"""Helpers of the app cluster tests: read Prometheus, the trace store and the log query."""

from __future__ import annotations

import time

import httpx
import pytest

from sregym.cluster.prometheus import query_value
from polling import eventually as _eventually


def prom(observability: dict, query: str) -> float | None:
    return query_value(observability["prometheus"], query)


def eventually(check, *, timeout: float, every: float = 5.0, what: str = "condition"):
    """Call ``check`` until it returns a truthy value; fail the test with ``what`` after ``timeout``."""
    return _eventually(check, timeout, every, what)


def traces(observability: dict, service: str, **params) -> list[dict]:
    r = httpx.get(f"{observability['traces']}/api/traces", params={"service": service, "lookback": "10m",
                                                                    "limit": 50, **params}, timeout=30)
    r.raise_for_status()
    return r.json()["data"] or []


def log_lines(observability: dict, namespace: str, text: str, since: str = "10m") -> list[dict]:
    r = httpx.get(f"{observability['logs']}/query", params={"namespace": namespace, "text": text, "since": since},
                  timeout=60)
    r.raise_for_status()
    return r.json()["lines"]
