"""The egress policy network_policy_deny writes leaves out the dependency's pods and only them.

The apps select a component's pods by two labels (its name and the release's instance), so a
single selector with both labels NotIn left out every pod of the app: search's policy that was to
cut it from rate cut it from geo too, and the processor's from the queue and cache as well."""

from __future__ import annotations

import pytest

from injectors.network_policy_deny import every_pod_but
from sregym.oracles._netpol import Endpoint, denying_policies

pytestmark = pytest.mark.ci

RATE = {"app.kubernetes.io/name": "rate", "app.kubernetes.io/instance": "hotel-reservation"}


def policy_for(source: dict[str, str], dependency: dict[str, str]) -> dict:
    return {"metadata": {"name": "search-egress", "namespace": "hotel"},
            "spec": {"podSelector": {"matchLabels": source}, "policyTypes": ["Egress"],
                     "egress": [{"to": every_pod_but(dependency)}]}}


def pod(name: str, namespace: str = "hotel", instance: str | None = "hotel-reservation") -> Endpoint:
    labels = {"app.kubernetes.io/name": name}
    if instance:
        labels["app.kubernetes.io/instance"] = instance
    return Endpoint(labels=labels, namespace=namespace)


@pytest.mark.parametrize("other", [pod("geo"), pod("rate", instance="another-release"),
                                   pod("coredns", "kube-system", instance=None), pod("geo", "elsewhere")],
                         ids=["same-app", "same-name-other-release", "dns", "other-namespace"])
def test_every_other_pod_stays_reachable(other):
    search = pod("search")
    policy = policy_for(search.labels, RATE)
    assert denying_policies([policy], search, other, 8080) == []


def test_the_dependency_is_left_out():
    search = pod("search")
    assert denying_policies([policy_for(search.labels, RATE)], search, pod("rate"), 8080) == [
        "egress:hotel/search-egress"]
