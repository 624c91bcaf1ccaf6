"""Teardown of what the agent made: which objects count as its own (pure logic; the live test is
tests/integration/conductor/test_agent_teardown.py)."""

from sregym.conductor.agent_objects import Snapshot, agent_creatable, changes, creatable_resources


def test_creatable_resources_come_from_the_rules_verbs():
    rules = [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]},
             {"apiGroups": [""], "resources": ["pods/exec", "configmaps"], "verbs": ["create"]},
             {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create", "patch"]}]
    assert creatable_resources(rules) == ["configmaps", "deployments.apps"]


def test_the_agents_role_lets_it_create_roles_and_workloads_and_they_are_looked_at():
    kinds = agent_creatable()
    assert {"deployments.apps", "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io",
            "services", "configmaps"} <= set(kinds)


def test_new_objects_not_in_the_release_are_the_agents_and_changed_ones_are_listed():
    before = Snapshot("shop", ["deployments.apps", "configmaps"], {
        ("deployments.apps", "api"): ("u1", "10", "Deployment"),
        ("configmaps", "leftover"): ("u2", "5", "ConfigMap")})
    after = Snapshot("shop", before.resources, {
        ("deployments.apps", "api"): ("u1", "11", "Deployment"),   # release object: drift, not here
        ("configmaps", "leftover"): ("u2", "6", "ConfigMap"),      # not the release's, changed
        ("deployments.apps", "reader"): ("u3", "1", "Deployment"),  # new: the agent's
        ("configmaps", "settings"): ("u4", "1", "ConfigMap")})     # new but the release's (recreated)
    found = changes(before, after, {("Deployment", "api"), ("ConfigMap", "settings")})
    assert [(o.name, o.change) for o in found] == [("leftover", "changed"), ("reader", "created")]


def test_an_object_deleted_and_recreated_under_the_same_name_is_new():
    before = Snapshot("shop", ["services"], {("services", "web"): ("u1", "3", "Service")})
    after = Snapshot("shop", ["services"], {("services", "web"): ("u9", "1", "Service")})
    assert [o.change for o in changes(before, after, set())] == ["created"]
