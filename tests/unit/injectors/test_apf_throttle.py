"""apf_throttle's pure logic: the flow-control objects it installs, what it refuses, what recover
removes. (Its effect on a cluster: tests/integration/injectors/test_apf_throttle_on_cluster.py.)"""

from __future__ import annotations

import json
import re

import pytest

from injectors import apf_throttle as apf
from sregym.core.errors import UserInputError
from sregym.core.problem import Selector
from sregym.injectors import INJECTORS, FaultContext, KUBERNETES_API

TELLING = re.compile(r"chaos|fault|inject|sregym|node-ops|throttle", re.I)


def objects(shares: int = 0) -> tuple[dict, dict]:
    level, schema = apf.manifests("pipeline-batch", "event-pipeline", "queue-operator", 500, shares)
    return level, schema


def test_the_level_has_no_seats_nothing_to_borrow_and_rejects():
    level, _ = objects()
    limited = level["spec"]["limited"]
    assert level["spec"]["type"] == "Limited"
    assert limited == {"nominalConcurrencyShares": 0, "lendablePercent": 0, "borrowingLimitPercent": 0,
                       "limitResponse": {"type": "Reject"}}


def test_the_schema_catches_every_request_of_the_account_and_only_it():
    level, schema = objects()
    spec = schema["spec"]
    assert spec["priorityLevelConfiguration"] == {"name": level["metadata"]["name"]}
    # below the suggested 'service-accounts' schema (9000) every other account falls in; never 1 (exempt's)
    assert 1 < spec["matchingPrecedence"] < 9000
    (rule,) = spec["rules"]
    assert rule["subjects"] == [{"kind": "ServiceAccount",
                                 "serviceAccount": {"name": "queue-operator", "namespace": "event-pipeline"}}]
    assert rule["resourceRules"][0]["clusterScope"] and rule["resourceRules"][0]["namespaces"] == ["*"]
    assert rule["nonResourceRules"] == [{"verbs": ["*"], "nonResourceURLs": ["*"]}]


def test_the_objects_look_like_a_teams_no_labels_annotations_or_telling_words():
    for m in objects():
        assert set(m["metadata"]) == {"name"}
        assert not TELLING.search(json.dumps(m))


def test_parameters_keep_the_exempt_precedence_and_the_catch_alls_out_of_reach():
    params = INJECTORS.get("apf_throttle").Params
    for bad in ({"name": "x", "matching_precedence": 1}, {"name": "x", "matching_precedence": 9000},
                {"name": "Bad_Name"}, {"name": "x", "nominal_concurrency_shares": -1}):
        with pytest.raises(Exception):
            params(**bad)


def test_rejected_counts_only_flow_control_refusals():
    assert apf.rejected([200, 403, 429, 429, 504]) == 2


class FakeKube:
    """Objects by (kind, name); records deletes."""

    def __init__(self, existing=()):
        self.objects = {k: {"metadata": {"name": k[1]}} for k in existing}
        self.deleted: list[tuple[str, str]] = []


@pytest.fixture
def fake(monkeypatch):
    kube = FakeKube()
    monkeypatch.setattr(apf, "get_object", lambda k, kind, name, ns: k.objects.get((kind, name)))
    monkeypatch.setattr(apf, "delete_object", lambda k, kind, name, ns: k.deleted.append((kind, name)))
    workload = {"metadata": {"name": "queue-operator"},
                "spec": {"template": {"spec": {"serviceAccountName": "queue-operator", "containers": [{"name": "op"}]}}}}
    monkeypatch.setattr(apf.ApfThrottle, "locate", lambda self: ("Deployment", "event-pipeline", workload, 0))
    return kube


def primitive(kube, **params):
    ctx = FaultContext(kube=kube, app_namespace="event-pipeline", hidden_namespace="hidden")
    cls = INJECTORS.get("apf_throttle")
    return cls(cls.Params(name="pipeline-batch", **params), Selector(kind="Deployment", name="queue-operator"), ctx,
               KUBERNETES_API)


def test_plan_refuses_a_name_that_exists_since_recover_deletes_by_name(fake):
    fake.objects[("FlowSchema", "pipeline-batch")] = {}
    with pytest.raises(UserInputError, match="FlowSchema named 'pipeline-batch' already exists"):
        primitive(fake).plan()


def test_recover_deletes_the_schema_then_the_level_and_is_idempotent(fake):
    p = primitive(fake)
    state = p.plan()
    assert state.service_account == "queue-operator" and state.workload == ["Deployment", "event-pipeline",
                                                                            "queue-operator"]
    # rebuilt from the journal, as `sregym cleanup` does after a crash
    state = type(p).load_state(json.loads(json.dumps(type(p).dump_state(state))))
    p.recover(state)
    p.recover(state)
    assert fake.deleted == [("FlowSchema", "pipeline-batch"), ("PriorityLevelConfiguration", "pipeline-batch")] * 2


def test_verify_reports_what_the_burst_saw(fake, monkeypatch):
    p = primitive(fake)
    state = p.plan()
    monkeypatch.setattr(apf, "VERIFY_SECONDS", 0.0)
    monkeypatch.setattr(type(p), "probe", lambda self, s: [200, 429, 429, 200])
    v = p.verify(state)
    assert v.ok and "2 of 4" in v.detail
    monkeypatch.setattr(type(p), "probe", lambda self, s: [200] * 4)
    assert not p.verify(state).ok


def test_the_kit_knows_both_kinds():
    from sregym.injectors._objects import API_VERSIONS
    assert API_VERSIONS["FlowSchema"] == API_VERSIONS["PriorityLevelConfiguration"] == "flowcontrol.apiserver.k8s.io/v1"


