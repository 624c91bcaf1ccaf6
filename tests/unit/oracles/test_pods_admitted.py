"""pods_admitted: passes only while a dry-run pod is admitted, and says why when it is refused."""

from __future__ import annotations

from types import SimpleNamespace

from kubernetes.client import (V1Container, V1Deployment, V1DeploymentSpec, V1LabelSelector, V1ObjectMeta, V1Pod,
                               V1PodSpec, V1PodTemplateSpec, V1ResourceRequirements)
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


# The anti-gaming matrix, hotel_user_limit_range x recreate_namespace_objects: deleting and recreating
# the namespace's objects created the user Deployment before the LimitRange, so user ran, the login
# answered and both oracles passed, while the LimitRange stood again and refuses user's next pod.
# A plain pod says nothing there (a LimitRange without defaults gives it its maximum as the limit);
# the workload's own template is what its ReplicaSet will send.
class FakeApps:
    def __init__(self, template: V1PodTemplateSpec | None):
        self.template, self.read = template, []

    def read_namespaced_deployment(self, name, namespace):
        self.read.append((name, namespace))
        if self.template is None:
            raise ApiException(status=404, reason="Not Found")
        return V1Deployment(metadata=V1ObjectMeta(name=name), spec=V1DeploymentSpec(
            selector=V1LabelSelector(match_labels={"app": name}), template=self.template))


USER_TEMPLATE = V1PodTemplateSpec(metadata=V1ObjectMeta(labels={"app": "user"}), spec=V1PodSpec(containers=[
    V1Container(name="user", image="sregym/hotel:1", resources=V1ResourceRequirements(limits={"memory": "128Mi"}))]))


class LimitRangeCore(FakeCore):
    """Admission with a LimitRange capping container memory at 8Mi."""

    def create_namespaced_pod(self, namespace, body, dry_run=None):
        self.calls.append((namespace, body, dry_run))
        spec = body.spec if isinstance(body, V1Pod) else None
        limits = [c.resources.limits for c in spec.containers if c.resources and c.resources.limits] if spec else []
        if any(lim.get("memory") == "128Mi" for lim in limits):
            e = ApiException(status=403, reason="Forbidden")
            e.body = '{"message": "pods \\"user-x\\" is forbidden: maximum memory usage per Container is 8Mi"}'
            raise e
        return body


def check_workload(template, **params):
    core, apps = LimitRangeCore([True]), FakeApps(template)
    p = AdmittedParams(window_seconds=0.2, interval_seconds=0.05, **params)
    kube = SimpleNamespace(core=core, apps=apps)
    return PodsAdmitted(p, MitigationContext(kube=kube, namespace="hotel", window_seconds=0)).check(), core, apps


def test_the_workloads_next_pod_refused_fails_though_a_plain_pod_is_admitted():
    assert check_workload(USER_TEMPLATE)[0].passed  # a plain pod: admitted under the LimitRange
    result, core, apps = check_workload(USER_TEMPLATE, workload="user")
    assert not result.passed
    assert "maximum memory usage per Container is 8Mi" in result.message + str(result.evidence)
    assert apps.read and apps.read[0] == ("user", "hotel")
    _, body, dry = core.calls[0]
    assert dry == "All" and body.spec == USER_TEMPLATE.spec and body.metadata.labels == {"app": "user"}


def test_the_workloads_next_pod_admitted_passes():
    small = V1PodTemplateSpec(metadata=V1ObjectMeta(labels={"app": "user"}), spec=V1PodSpec(containers=[
        V1Container(name="user", image="sregym/hotel:1", resources=V1ResourceRequirements(limits={"memory": "8Mi"}))]))
    assert check_workload(small, workload="user")[0].passed


def test_a_workload_that_is_gone_fails_and_says_so():
    result, _, _ = check_workload(None, workload="user")
    assert not result.passed
    assert "deployment/user" in result.message + str(result.evidence)


def test_every_quota_or_limit_range_problem_grades_its_targets_next_pod():
    """A running target says nothing of a cap standing again: every problem whose root cause is a
    ResourceQuota or LimitRange asks admission about its target's own template. (For a pod-count
    quota this also fails a fix that leaves no headroom: with used at hard the target's next pod,
    a rollout's surge included, is refused, as ``quota_not_binding`` holds too.)"""
    from sregym.core.loader import load_catalog

    for lp in load_catalog().problems.values():
        problem = lp.problem
        for fault in (f for f in problem.root_cause_faults if f.injector == "resource_quota"):
            asked = [o.params.get("workload") for o in problem.oracles.mitigation if o.name == "pods_admitted"]
            assert fault.target.name in asked, f"{problem.id}: no pods_admitted oracle on workload {fault.target.name}"
