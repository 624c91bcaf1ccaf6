"""The agent's RBAC rules: an SRE's rights in its namespace, an on-call SRE's cluster-wide reads (safe
only behind the API proxy, which hides the fault plane), never other namespaces' secrets or writes."""

from __future__ import annotations

import pytest

from sregym.cluster.agent_access import (agent_identity, app_namespace_rules, cluster_rules, grant_agent_access,
                                         observability_rules)
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.errors import UserInputError


def grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_no_rule_uses_wildcards_or_escalation_verbs() -> None:
    for rules in (app_namespace_rules(), observability_rules(), cluster_rules()):
        for group, resource, verb in grants(rules):
            assert "*" not in (group, resource, verb)
            assert verb not in ("escalate", "bind", "impersonate")


def test_cluster_wide_rules_are_an_on_call_sres_reads_without_secrets() -> None:
    resources = {r for _, r, _ in grants(cluster_rules())}
    assert {"pods", "pods/log", "events", "services", "deployments", "nodes", "namespaces"} <= resources
    assert not resources & {"secrets", "configmaps", "roles", "rolebindings", "clusterroles", "clusterrolebindings",
                            "nodes/proxy", "services/proxy", "pods/proxy", "pods/exec", "serviceaccounts/token"}
    assert {v for _, _, v in grants(cluster_rules())} <= {"get", "list", "watch"}


def test_the_proxy_impersonates_exactly_the_service_accounts_identity() -> None:
    user, groups = agent_identity("shop")
    assert user == "system:serviceaccount:shop:sre-oncall"
    assert groups == ["system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"]


def test_observability_is_read_only() -> None:
    assert {v for _, _, v in grants(observability_rules())} <= {"get", "list", "watch"}
    assert "secrets" not in {r for _, r, _ in grants(observability_rules())}


def test_the_app_namespace_allows_what_an_sre_does() -> None:
    allowed = grants(app_namespace_rules())
    for need in [("", "pods", "delete"), ("", "pods/log", "get"), ("", "pods/exec", "create"),
                 ("apps", "deployments", "patch"), ("apps", "deployments/scale", "update"),
                 ("", "configmaps", "update"), ("", "secrets", "get"), ("networking.k8s.io", "networkpolicies", "delete"),
                 ("rbac.authorization.k8s.io", "rolebindings", "update"), ("", "events", "list")]:
        assert need in allowed, need
    assert ("", "namespaces", "delete") not in allowed


def test_the_hidden_namespace_is_never_granted() -> None:
    with pytest.raises(UserInputError, match="hidden"):
        grant_agent_access(None, HIDDEN_NAMESPACE)  # refused before any API call


def test_the_agent_edits_an_operators_custom_resource_but_never_creates_or_deletes_one() -> None:
    allowed = grants(app_namespace_rules())
    for verb in ("get", "list", "watch", "patch", "update"):
        assert ("pipeline.sregym.io", "queueclusters", verb) in allowed
    assert not {("pipeline.sregym.io", "queueclusters", v) for v in ("create", "delete")} & allowed
    # CRDs are cluster objects: never writable
    assert not {g for g, _, v in grants(cluster_rules() + app_namespace_rules())
                if v not in ("get", "list", "watch")} & {"apiextensions.k8s.io"}


def test_the_agent_may_port_forward_to_no_pod() -> None:
    """A port-forward is dialled inside the target pod's own network, where the observability fence
    does not apply (the conductor reaches the stack that way from a workstation): the agent must
    not be able to open one, in its namespace or any other."""
    for rules in (app_namespace_rules(), observability_rules(), cluster_rules()):
        assert not {(g, r) for g, r, _ in grants(rules)} & {("", "pods/portforward"), ("", "services/proxy"),
                                                             ("", "pods/proxy")}


def test_the_agent_reads_api_flow_control_but_can_never_change_it() -> None:
    """FlowSchemas and priority levels are cluster-wide and decide whose requests the API server
    serves. With patch, an agent could send any non-exempt client of the shared cluster (the
    controllers, the kubelets, Prometheus, whose targets the SLO oracle reads) to a zero-seat level
    that answers 429, and set ``apf.kubernetes.io/autoupdate-spec: "false"`` on a suggested level so
    the API server stops restoring it; with delete, it could take the mandatory ``exempt`` schema
    away again and again (the API server puts it back once a minute), sending the conductor's
    system:masters requests to ``global-default`` meanwhile, and remove a lab cluster's own
    schemas. RBAC cannot tell a fix from those (it cannot look at the content; resourceNames would
    name the faulty object to `kubectl auth can-i --list`), so the grant is read only; the live
    check is tests/integration/injectors/test_apf_throttle_on_cluster.py."""
    group = "flowcontrol.apiserver.k8s.io"
    everything = grants(cluster_rules() + app_namespace_rules() + observability_rules())
    for resource in ("flowschemas", "prioritylevelconfigurations"):
        assert {v for g, r, v in everything if g == group and r == resource} == {"get", "list", "watch"}
