"""What the chart never had does not outlive a deploy, on the real cluster: an ``env`` entry added to
one of the hotel's Deployments (as an agent may: ``kubectl set env``) is invisible to ``kubectl
diff`` and kept by helm's three-way merge, so it used to survive into every later episode (found by
the anti-gaming matrix). The next deploy now finds it, upgrades, and removes it; the deploy after
that reuses the release."""

from __future__ import annotations

import pytest

from sregym.apps import lifecycle
from sregym.apps.spec import load_app

pytestmark = pytest.mark.cluster

NAMESPACE = "hotel-reservation"


def env_names(cluster, deployment: str) -> list[str]:
    d = cluster.kube.apps.read_namespaced_deployment(deployment, NAMESPACE)
    return [e.name for e in d.spec.template.spec.containers[0].env or []]


def test_an_env_entry_the_chart_never_had_is_removed_by_the_next_deploy(cluster):
    spec = load_app("hotel-reservation")
    lifecycle.deploy(cluster, spec, NAMESPACE)  # the release as the chart makes it (reused when it is)
    assert "GEO_ADDR" not in env_names(cluster, "search")
    cluster.kube.kubectl("-n", NAMESPACE, "set", "env", "deployment/search", "GEO_ADDR=geo-b:8080")
    try:
        assert "GEO_ADDR" in env_names(cluster, "search")
        again = lifecycle.deploy(cluster, spec, NAMESPACE)
        assert not again.reused and f"apps.v1.Deployment.{NAMESPACE}.search" in again.drift_reset, again
        assert "GEO_ADDR" not in env_names(cluster, "search")
        assert lifecycle.deploy(cluster, spec, NAMESPACE).reused  # nothing left to put back
    finally:
        cluster.kube.kubectl("-n", NAMESPACE, "set", "env", "deployment/search", "GEO_ADDR-", check=False)
