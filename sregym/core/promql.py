"""The placeholders an app's SLO queries may use, filled in one place for every reader, and the
timing of the metrics they read (the shortest rate window, the scrape interval)."""

from __future__ import annotations

from pathlib import Path

import yaml

from sregym.core.constants import LOADGEN_NAMESPACE
from sregym.core.durations import parse_duration

# The shortest window a success rate means something over. The load generators send about 5
# requests a second (4.3-5 measured), so 20 s hold ~90-100 requests and ~10 scrapes at the 2 s pod
# scrape (charts/observability ``podScrapeInterval``): one stray failed request then moves the rate
# by ~1%, inside the SLO oracle's 2% tolerance. Over 10 s (~45 requests) one stray failure alone
# would reach the tolerance, and the rate would jump with the scrape phase.
MIN_RATE_WINDOW_SECONDS = 20
OBSERVABILITY_CHART = Path(__file__).resolve().parents[2] / "charts" / "observability"


def render_query(query: str, namespace: str, window: str) -> str:
    """``$loadgen_namespace`` (where the load generator runs, out of the agent's reach),
    ``$namespace`` (the app's namespace) and ``$window`` (a rate window such as ``1m``)."""
    return (query.replace("$loadgen_namespace", LOADGEN_NAMESPACE).replace("$namespace", namespace)
            .replace("$window", window))


def scrape_interval_seconds() -> float:
    """How often Prometheus scrapes the pods that ask for it (the load generators, whose counters
    the SLOs read, and the apps), as the observability chart sets it: how far a metric lags the system."""
    values = yaml.safe_load((OBSERVABILITY_CHART / "values.yaml").read_text())
    return parse_duration(str(values["prometheus"]["podScrapeInterval"]))
