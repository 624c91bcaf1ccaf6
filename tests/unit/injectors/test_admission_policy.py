"""admission_policy's pure logic: the policy, binding and ConfigMap it installs, what it refuses,
what recover removes. (Its effect on a cluster: tests/integration/injectors/test_admission_policy_on_cluster.py.)"""

from __future__ import annotations

import json
import re

import pytest

from injectors import admission_policy as ap
from sregym.core.errors import UserInputError
from sregym.core.problem import Selector
from sregym.injectors import INJECTORS, KUBERNETES_API, FaultContext

TELLING = re.compile(r"chaos|fault|inject|sregym|node-ops|freeze", re.I)


def objects() -> list[dict]:
    return ap.manifests("replica-limits", "event-pipeline", "StatefulSet", "scaling-limits", "maxReplicas", 0)


def test_the_limit_lives_in_a_configmap_of_the_namespace_that_the_binding_reads_there():
    params, policy, binding = objects()
    assert params["kind"] == "ConfigMap" and params["metadata"]["namespace"] == "event-pipeline"
    assert params["data"] == {"maxReplicas": "0"}
    assert policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    ref = binding["spec"]["paramRef"]
    assert ref == {"name": "scaling-limits", "parameterNotFoundAction": "Allow"}  # no namespace: the object's own
    assert binding["spec"]["validationActions"] == ["Deny"] and binding["spec"]["policyName"] == "replica-limits"
    assert binding["spec"]["matchResources"] == {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "event-pipeline"}}}


def test_only_creates_and_scale_ups_of_the_kind_are_judged_not_its_scale_subresource():
    rules = objects()[1]["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                      "resources": ["statefulsets"]}]
    rule = objects()[1]["spec"]["validations"][0]
    # an update that does not raise replicas (rolling restart, noise's edits) always passes
    assert rule["expression"].startswith("(request.operation == 'UPDATE' && object.spec.replicas <= oldObject")
    assert "int(params.data.maxReplicas)" in rule["expression"]
    assert objects()[1]["spec"]["failurePolicy"] == "Fail" and rule["reason"] == "Forbidden"


def test_the_objects_look_like_a_platform_teams():
    for m in objects():
        assert set(m["metadata"]) <= {"name", "namespace"}
        assert not TELLING.search(json.dumps(m))


class FakeKube:
    def __init__(self):
        self.objects: dict = {}
        self.deleted: list = []


@pytest.fixture
def fake(monkeypatch):
    kube = FakeKube()
    monkeypatch.setattr(ap, "get_object", lambda k, kind, name, ns: k.objects.get((kind, name)))
    monkeypatch.setattr(ap, "delete_object", lambda k, kind, name, ns: k.deleted.append((kind, name, ns)))
    sts = {"kind": "StatefulSet", "metadata": {"name": "pipeline-queue", "namespace": "event-pipeline"},
           "spec": {"template": {"spec": {"containers": [{"name": "nats"}]}}}}
    monkeypatch.setattr(ap.AdmissionPolicy, "locate", lambda self: ("StatefulSet", "event-pipeline", sts, 0))
    return kube


def primitive(kube):
    ctx = FaultContext(kube=kube, app_namespace="event-pipeline", hidden_namespace="hidden")
    cls = INJECTORS.get("admission_policy")
    return cls(cls.Params(), Selector(kind="StatefulSet", name="pipeline-queue"), ctx, KUBERNETES_API)


@pytest.mark.parametrize("kind,name", [("ValidatingAdmissionPolicy", "replica-limits"),
                                       ("ValidatingAdmissionPolicyBinding", "replica-limits"),
                                       ("ConfigMap", "scaling-limits")])
def test_plan_refuses_names_that_exist_since_recover_deletes_by_name(fake, kind, name):
    fake.objects[(kind, name)] = {}
    with pytest.raises(UserInputError, match=f"{kind} named '{name}' already exists"):
        primitive(fake).plan()


def test_recover_deletes_binding_policy_then_configmap_idempotently(fake):
    p = primitive(fake)
    state = type(p).load_state(json.loads(json.dumps(type(p).dump_state(p.plan()))))
    p.recover(state)
    p.recover(state)
    assert fake.deleted == [("ValidatingAdmissionPolicyBinding", "replica-limits", None),
                            ("ValidatingAdmissionPolicy", "replica-limits", None),
                            ("ConfigMap", "scaling-limits", "event-pipeline")] * 2


def test_only_workload_kinds_it_can_judge_are_targets():
    with pytest.raises(UserInputError):
        INJECTORS.get("admission_policy").check_target(Selector(kind="DaemonSet", name="x"))
