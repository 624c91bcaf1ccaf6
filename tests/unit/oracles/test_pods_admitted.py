"""pods_admitted: passes only while a dry-run pod is admitted, and says why when it is refused."""

from __future__ import annotations

from types import SimpleNamespace

from kubernetes.client.exceptions import ApiException

from oracles.admission import AdmittedParams, PodsAdmitted
from sregym.oracles import MitigationContext

REFUSAL = ('{"kind":"Status","status":"Failure","message":"Internal error occurred: failed calling webhook '
           '\\"pod-policy.shop.svc\\": connect: connection refused","code":500}')


class FakeCore:
    def __init__(self, answers: list[bool]):
        self.answers, self.calls = list(answers), []

    def create_namespaced_pod(self, namespace, body, dry_run=None):
        self.calls.append((namespace, body, dry_run))
        if not (self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]):
            e = ApiException(status=500, reason="Internal Server Error")
            e.body = REFUSAL
            raise e
        return body


def check(answers: list[bool], **params):
    core = FakeCore(answers)
    p = AdmittedParams(window_seconds=0.2, interval_seconds=0.05, **params)
    result = PodsAdmitted(p, MitigationContext(kube=SimpleNamespace(core=core), namespace="shop", window_seconds=0)).check()
    return result, core


def test_admitted_at_every_sample_passes_and_nothing_is_stored():
    result, core = check([True])
    assert result.passed
    assert core.calls and all(dry == "All" for _, _, dry in core.calls)  # a dry run: the pod is never created
    assert all(ns == "shop" and body["metadata"]["namespace"] == "shop" for ns, body, _ in core.calls)


def test_a_refusal_fails_and_names_the_webhook():
    result, _ = check([False])
    assert not result.passed
    assert "failed calling webhook" in result.message + str(result.evidence)


def test_a_refusal_in_the_window_fails_it():
    result, _ = check([True, False, True])
    assert not result.passed


def test_the_tried_pod_carries_the_given_labels():
    _, core = check([True], labels={"app": "web"})
    assert core.calls[0][1]["metadata"]["labels"] == {"app": "web"}
