"""admission_policy on the real local cluster: the controller's scale-up of its StatefulSet is refused
by the policy (its message names it), updates that do not scale up and the /scale subresource are
not; the agent's own fix (the namespace's ConfigMap, within its RBAC) lets the scale-up through;
recover (twice) and `sregym cleanup` after a SIGKILLed run leave nothing."""

from __future__ import annotations

import json

import pytest
from injector_testapp import (context, delete_namespace, killed_run, recover_leftovers, start,  # noqa: F401 - autouse fixture
                              wait_until)

from sregym.cluster.agent_access import grant_agent_access, revoke_agent_access
from sregym.cluster.capabilities import CapabilityCache
from sregym.conductor.journal import open_journals
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.problem import Selector
from sregym.injectors._objects import create_object, get_object

from injectors.admission_policy import BINDING, POLICY

# Measured on the local cluster (v1.35.4): the first ConfigMap-param policy is enforced, every one
# made after one was removed is not (its params are never found, so the binding admits): the API
# server stops its shared ConfigMap informer when the last bound policy using ConfigMap params goes
# and never starts it again (docs/injectors.md, "Admission policy"). Both tests pass on a fresh API
# server and the second fails after the first; they run only where asked, until the local cluster
# keeps one such policy bound for good.
pytestmark = [pytest.mark.cluster, pytest.mark.skipif(
    "SREGYM_ADMISSION_POLICY_TESTS" not in __import__("os").environ,
    reason="a ConfigMap-param admission policy is enforced only until the first one is removed "
           "(the API server's informer stops; docs/injectors.md); set SREGYM_ADMISSION_POLICY_TESTS=1 "
           "on a fresh API server")]
NS = "vap-t"
SA = "scaler"
STS = "queue"
NAME = "replica-limits"
CM = "scaling-limits"
TARGET = Selector(kind="StatefulSet", name=STS)
BASE = f"/apis/apps/v1/namespaces/{NS}/statefulsets"


@pytest.fixture(scope="module")
def app(cluster):
    """A namespace with a controller's ServiceAccount (may create and patch StatefulSets) and a
    StatefulSet at zero replicas (the API server's answers are under test, not a pod)."""
    kube = cluster.kube
    for kind in (BINDING, POLICY):
        if get_object(kube, kind, NAME, None) is not None:
            kube.kubectl("delete", kind.lower(), NAME, "--ignore-not-found")
    delete_namespace(kube, NS)
    labels = {"app": STS}
    for m in [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": NS}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": SA, "namespace": NS},
         "rules": [{"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "create", "patch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": SA, "namespace": NS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SA},
         "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": NS}]},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": STS, "namespace": NS},
         "spec": {"replicas": 0, "serviceName": STS, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "containers": [{"name": "main", "image": "sregym/base:bookworm"}]}}}},
    ]:
        create_object(kube, m)
    yield kube
    delete_namespace(kube, NS)


def patch_as(kube, who: str, body: dict, *, sub: str = "", dry: bool = True) -> tuple[int, str]:
    return kube.request_as(NS, who, "PATCH", f"{BASE}/{STS}{sub}", body, [("dryRun", "All")] if dry else [],
                           content_type="application/merge-patch+json")


def scale_up(kube) -> tuple[int, str]:
    """The controller's scale-up of its StatefulSet, 0 -> 1 (a dry run: nothing changes)."""
    return patch_as(kube, SA, {"spec": {"replicas": 1}})


def gone(kube) -> bool:
    return (get_object(kube, BINDING, NAME, None) is None and get_object(kube, POLICY, NAME, None) is None
            and get_object(kube, "ConfigMap", CM, NS) is None)


def test_a_scale_freeze_refuses_the_controllers_scale_up_until_the_namespace_limit_is_raised(cluster, app):
    assert scale_up(app)[0] == 200, "the controller cannot scale before any fault"
    ctx = context(cluster, NS, CapabilityCache(app, HIDDEN_NAMESPACE))
    c = start(ctx, "admission_policy", {"name": NAME, "config_map": CM}, TARGET)
    v = c.verify(timeout=30)
    print(f"\nverify: {v.detail}")
    wait_until(lambda: scale_up(app)[0] == 403, 20, 1, "the scale-up to be refused")
    status, text = scale_up(app)
    message = json.loads(text)["message"]
    print(f"controller's scale-up: {status} {message}")
    assert f"ValidatingAdmissionPolicy '{NAME}' with binding '{NAME}' denied request" in message
    assert "above the namespace limit of 0" in message
    # what keeps running: an update that does not scale up (a rolling restart), and /scale
    restart = {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}
    assert patch_as(app, SA, restart)[0] == 200
    assert app.kubectl("scale", "statefulset", STS, "-n", NS, "--replicas=1", "--dry-run=server").returncode == 0
    # the agent's fix, in its namespace and within its rights
    grant_agent_access(app, NS)
    try:
        fix = {"data": {"maxReplicas": "3"}}
        wait_until(lambda: app.request_as(NS, "sre-oncall", "PATCH", f"/api/v1/namespaces/{NS}/configmaps/{CM}", fix,
                                          content_type="application/merge-patch+json")[0] == 200,
                   20, 1, "the agent to raise the limit")
        wait_until(lambda: scale_up(app)[0] == 200, 20, 1, "the scale-up to be admitted after the fix")
        # and the policy itself is out of its reach: it neither reads nor changes it
        path = f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/{NAME}"
        assert app.request_as(NS, "sre-oncall", "GET", path)[0] == 403
        assert app.request_as(NS, "sre-oncall", "DELETE", path)[0] == 403
    finally:
        revoke_agent_access(app, NS)
    c.recover()
    assert gone(app)
    c.recover()  # idempotent
    assert gone(app) and scale_up(app)[0] == 200


def test_cleanup_after_a_killed_run_removes_the_policy_its_binding_and_the_limit(cluster, app, tmp_path):
    journal_dir = tmp_path / "journal"

    def in_place() -> None:
        wait_until(lambda: scale_up(app)[0] == 403, 20, 1, "the scale-up to be refused")

    results = killed_run(cluster, journal_dir, NS, "admission_policy", {"name": NAME, "config_map": CM}, TARGET,
                         in_place)
    assert [(r.recovered, r.errors, r.closed) for r in results] == [(["killed"], [], True)]
    assert gone(app) and open_journals(journal_dir) == []
    wait_until(lambda: scale_up(app)[0] == 200, 20, 1, "the scale-up to be admitted after cleanup")
