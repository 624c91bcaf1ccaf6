"""The anti-gaming matrix's ``loosen_probes`` strategy keeps every probe but makes it forgiving (a
readiness probe asking /healthz or only connecting, 30 failures tolerated, 10 s timeouts), where
``remove_probes`` takes them away. workload_health must call every such probe of every chart's
workloads weaker than the chart's own, or the strategy would pass a readiness-graded problem."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

TESTS = Path(__file__).resolve().parents[2]
ROOT = TESTS.parent
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "integration" / "oracles"))

from gaming_strategies import loosened  # noqa: E402

from sregym.cluster.charts import template  # noqa: E402
from sregym.oracles import container_probes, weakened  # noqa: E402

CHARTS = ["hotel-reservation", "online-shop", "event-pipeline"]


def workloads(chart: str) -> list[dict]:
    docs = yaml.safe_load_all(template(ROOT / "charts" / chart, "ns", {}))
    return [d for d in docs if d and d.get("kind") in ("Deployment", "StatefulSet")]


@pytest.mark.parametrize("chart", CHARTS)
def test_every_loosened_probe_of_every_chart_is_called_weaker(chart):
    seen = 0
    for w in workloads(chart):
        spec = w["spec"]["template"]["spec"]
        want = container_probes(spec)
        live = {c["name"]: loosened(c) for c in spec["containers"]}
        reasons = weakened(want, live, w["metadata"]["name"])
        for container, probes in want.items():
            for kind in probes:
                seen += 1
                assert any(f"/{container} {kind}" in r for r in reasons), (w["metadata"]["name"], container, kind,
                                                                           reasons)
    assert seen, f"{chart}: no probe at all"


def test_a_readiness_probe_asks_what_liveness_asks_or_only_connects():
    c = {"name": "api", "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080}, "periodSeconds": 5},
         "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}}}
    assert loosened(c)["readinessProbe"] == {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5,
                                             "failureThreshold": 30, "timeoutSeconds": 10}
    c = {"name": "db", "readinessProbe": {"exec": {"command": ["pg_isready"]}}}
    assert loosened({"name": "db", "readinessProbe": {"tcpSocket": {"port": 5432}}})["readinessProbe"]["tcpSocket"] == \
        {"port": 5432}
    assert loosened(c)["readinessProbe"]["exec"] == {"command": ["true"]}
    assert loosened({"name": "x"}) == {}
