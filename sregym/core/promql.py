"""The placeholders an app's SLO queries may use, filled in one place for every reader, and the
timing of the metrics they read (the shortest rate window, the scrape interval)."""

from __future__ import annotations

import re
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


# a series selector: an optional metric name and its label matchers in braces; of the matchers, the
# equalities (``name="value"``: not ``=~``, ``!=`` or ``!~``)
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\{([^{}]*)\}")
_EQUALITY = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def series_selectors(query: str) -> list[tuple[str, str, dict[str, str]]]:
    """The series selectors written in braces in ``query``, each as (its text, its metric name or
    '', its equality matchers), in order."""
    return [(m.group(0), m.group(1) or "", dict(_EQUALITY.findall(m.group(2)))) for m in _SELECTOR.finditer(query)]


def fed_from_app_namespace(query: str) -> list[tuple[str, str, dict[str, str]]]:
    """The selectors of ``query`` (:func:`series_selectors`, rendered or not) that a pod in the app's
    namespace can feed: every one not pinned to the load generator's namespace
    (``namespace="$loadgen_namespace"``), out of the agent's reach. Prometheus sets ``namespace`` from the pod's
    real one, so a selector of the app's own namespace, or of none, also counts what any pod the
    agent runs there exports under the same name and labels."""
    return [s for s in series_selectors(query) if s[2].get("namespace") not in ("$loadgen_namespace", LOADGEN_NAMESPACE)]


def scrape_interval_seconds() -> float:
    """How often Prometheus scrapes the pods that ask for it (the load generators, whose counters
    the SLOs read, and the apps), as the observability chart sets it: how far a metric lags the system."""
    values = yaml.safe_load((OBSERVABILITY_CHART / "values.yaml").read_text())
    return parse_duration(str(values["prometheus"]["podScrapeInterval"]))
