"""Teardown of what the agent made: which objects count as its own (pure logic; the live test is
tests/integration/conductor/test_agent_teardown.py)."""

import json
from types import SimpleNamespace

import pytest

from sregym.conductor.agent_objects import Snapshot, agent_creatable, changes, creatable_resources, teardown


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


def test_a_snapshot_round_trips_through_json_for_the_journal():
    before = Snapshot("shop", ["deployments.apps", "configmaps"], {
        ("deployments.apps", "api"): ("u1", "10", "Deployment"),
        ("configmaps", "settings"): ("u2", "5", "ConfigMap")}, namespaces={"shop": "n1"}, namespace_uid="n1")
    data = json.loads(json.dumps(before.to_dict()))
    assert Snapshot.from_dict(data) == before
    assert data["objects"] == [["configmaps", "settings", "u2", "5", "ConfigMap"],
                               ["deployments.apps", "api", "u1", "10", "Deployment"]]  # one compact row each
    bare = Snapshot("shop", [])
    assert Snapshot.from_dict(bare.to_dict()) == bare and "namespaces" not in bare.to_dict()


@pytest.mark.parametrize("data", [{"v": 2, "namespace": "shop", "resources": [], "objects": []},
                                  {"namespace": "shop"}, {"v": 1, "namespace": "shop", "resources": []},
                                  {"v": 1, "namespace": "shop", "resources": [], "objects": [["configmaps", "x"]]}])
def test_a_snapshot_of_another_format_or_malformed_is_refused(data):
    with pytest.raises(ValueError, match="snapshot"):
        Snapshot.from_dict(data)


class Namespace:
    """The API of a namespace that was deleted and made anew: other uid, and the same-named objects
    (the API's own config map) have new uids too."""

    def __init__(self):
        self.deleted: list[str] = []

    def get_json(self, path):
        return {"metadata": {"name": "shop", "uid": "n2"}} if path == "/api/v1/namespaces/shop" else None

    def preferred_version(self, group):
        return f"{group}/v1" if group else "v1"

    def list_json(self, api_version, plural, namespace):
        items = [{"metadata": {"name": "kube-root-ca.crt", "uid": "u9", "resourceVersion": "1"}}]
        return {"kind": "ConfigMapList", "items": items if plural == "configmaps" else []}

    def kubectl(self, *args, **kw):
        if args[0] == "delete":
            self.deleted.append(args[1])
        return SimpleNamespace(returncode=0, stdout="", stderr="")


def test_teardown_leaves_a_namespace_made_anew_since_the_snapshot_alone(tmp_path):
    from sregym.cluster.handle import ClusterHandle

    before = Snapshot("shop", ["configmaps"], {("configmaps", "kube-root-ca.crt"): ("u2", "5", "ConfigMap")},
                      namespace_uid="n1")
    ns = Namespace()
    cluster = ClusterHandle.of(SimpleNamespace(kubectl=ns.kubectl, get_json=ns.get_json, list_json=ns.list_json,
                                                      preferred_version=ns.preferred_version, kubeconfig=tmp_path / "k", context=None))
    assert teardown(cluster, before, "shop") == [] and ns.deleted == []
