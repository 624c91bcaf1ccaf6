"""apf_throttle on the real local cluster: the API server answers 429 to a burst of requests made as
the target's ServiceAccount (and still serves that account one request at a time: a zero-seat
level is a jail, not a wall); the agent can read the flow-control objects but neither change nor
delete them; recover (twice) and `sregym cleanup` after a SIGKILLed run leave nothing and the
account is served again."""

from __future__ import annotations

import time

import pytest
from injector_testapp import (context, delete_namespace, killed_run, recover_leftovers, start,  # noqa: F401 - autouse fixture
                              wait_until)

from sregym.cluster.agent_access import grant_agent_access, revoke_agent_access
from sregym.cluster.capabilities import CapabilityCache
from sregym.conductor.journal import open_journals
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.problem import Selector
from sregym.injectors._objects import create_object, get_object

from injectors.apf_throttle import BURST, PROBE_PATH, rejected

pytestmark = pytest.mark.cluster
NS = "apf-t"
SA = "reporter"
NAME = "batch-reporting"
TARGET = Selector(kind="Deployment", name=SA)


@pytest.fixture(scope="module")
def app(cluster):
    """A namespace with a ServiceAccount and a Deployment (no replicas: the API server's answers to
    the account are what is under test, not a pod)."""
    kube = cluster.kube
    for kind in ("FlowSchema", "PriorityLevelConfiguration"):
        if get_object(kube, kind, NAME, None) is not None:
            kube.kubectl("delete", kind.lower(), NAME, "--ignore-not-found")
    delete_namespace(kube, NS)
    create_object(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    create_object(kube, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": NS}})
    labels = {"app": SA}
    create_object(kube, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": SA, "namespace": NS},
                         "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                                  "template": {"metadata": {"labels": labels}, "spec": {
                                      "serviceAccountName": SA,
                                      "containers": [{"name": "main", "image": "sregym/base:bookworm"}]}}}})
    yield kube
    delete_namespace(kube, NS)


def served(kube) -> bool:
    return rejected(kube.answers_as(NS, SA, PROBE_PATH, at_once=BURST, seconds=1.0, until=429)) == 0


def gone(kube) -> bool:
    return all(get_object(kube, k, NAME, None) is None for k in ("FlowSchema", "PriorityLevelConfiguration"))


def as_agent(kube, method: str, path: str, body: object | None = None) -> int:
    """The API server's status for one request made as the agent's ServiceAccount (what its proxy sends)."""
    api = kube.api_client
    headers = {"Accept": "application/json", "Impersonate-User": f"system:serviceaccount:{NS}:sre-oncall"}
    if body is not None:
        headers["Content-Type"] = "application/merge-patch+json" if method == "PATCH" else "application/json"
    m, url, hdrs, data, _ = api.param_serialize(method, path, header_params=headers, body=body,
                                                auth_settings=["BearerToken"])
    resp = api.call_api(m, url, header_params=hdrs, body=data, _request_timeout=30)
    resp.read()
    return resp.status


def test_a_zero_seat_level_rejects_the_accounts_concurrent_requests_until_recovered(cluster, app):
    assert served(app), "the account is refused before any fault"
    ctx = context(cluster, NS, CapabilityCache(app, HIDDEN_NAMESPACE))
    c = start(ctx, "apf_throttle", {"name": NAME}, TARGET)
    v = c.verify(timeout=30)
    print(f"\nverify: {v.detail}")
    # one request at a time is still served (the jail's one seat): measured, and said in docs/injectors.md
    lone = [app.answers_as(NS, SA, PROBE_PATH)[0] for _ in range(10)]
    print(f"ten lone requests: {lone}")
    assert rejected(lone) == 0, lone
    # the objects a team would have made: no label, no annotation of ours, kubectl's manager
    for kind in ("FlowSchema", "PriorityLevelConfiguration"):
        meta = get_object(app, kind, NAME, None)["metadata"]
        assert not meta.get("labels") and not meta.get("annotations"), meta
        assert {f["manager"] for f in meta.get("managedFields") or []} <= {"kubectl-create", "api-priority-and-fairness-config-consumer-v1"}, meta
    c.recover()
    wait_until(lambda: served(app), 30, 1, "the account to be served again")
    assert gone(app)
    c.recover()  # idempotent
    assert gone(app)


def test_the_agent_reads_flow_control_but_can_neither_change_nor_delete_it(cluster, app):
    """The attack the read-only grant closes (tests/unit/cluster/test_agent_access_rules.py): the
    agent sending another client (here: the system:masters schema every conductor request falls
    in) to a level that rejects it, or deleting the mandatory schemas."""
    grant_agent_access(app, NS)
    try:
        base = "/apis/flowcontrol.apiserver.k8s.io/v1"
        wait_until(lambda: as_agent(app, "GET", f"{base}/flowschemas") == 200, 20, 1, "the agent's read grant")
        assert as_agent(app, "GET", f"{base}/prioritylevelconfigurations/exempt") == 200
        jail = {"spec": {"priorityLevelConfiguration": {"name": "catch-all"}}}
        assert as_agent(app, "PATCH", f"{base}/flowschemas/exempt", jail) == 403
        assert as_agent(app, "DELETE", f"{base}/flowschemas/exempt") == 403
        assert as_agent(app, "DELETE", f"{base}/prioritylevelconfigurations/global-default") == 403
        schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
                  "metadata": {"name": "a-oncall-override"},
                  "spec": {"priorityLevelConfiguration": {"name": "catch-all"}, "matchingPrecedence": 2,
                           "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:nodes"}}],
                                      "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
        assert as_agent(app, "POST", f"{base}/flowschemas", schema) == 403
    finally:
        revoke_agent_access(app, NS)


def test_cleanup_after_a_killed_run_removes_the_flow_schema_and_its_level(cluster, app, tmp_path):
    journal_dir = tmp_path / "journal"

    def in_place() -> None:
        wait_until(lambda: not served(app), 20, 1, "the account to be refused")
        assert not gone(app), "the killed run's fault is not in place"

    results = killed_run(cluster, journal_dir, NS, "apf_throttle", {"name": NAME}, TARGET, in_place)
    assert [(r.recovered, r.errors, r.closed) for r in results] == [(["killed"], [], True)]
    assert gone(app) and open_journals(journal_dir) == []
    t = time.monotonic()
    wait_until(lambda: served(app), 30, 1, "the account to be served again")
    print(f"\nserved again {time.monotonic() - t:.1f} s after cleanup")
