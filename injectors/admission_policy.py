"""A ValidatingAdmissionPolicy freezes scale-ups: the namespace's limit, kept in a ConfigMap, is 0.

A platform team caps how far workloads of one kind may scale in each namespace with a
``ValidatingAdmissionPolicy`` (CEL, evaluated inside the API server, no webhook) whose parameters
are a ConfigMap in each namespace (``paramRef`` without a namespace: the namespace of the object
being admitted). A maintenance window sets the namespace's limit to 0 (a scale-up freeze) and
nobody sets it back. From then on the API server refuses every create of that kind above the limit
and every update that raises its replicas above it (``... is forbidden: ValidatingAdmissionPolicy
'<name>' with binding '<name>' denied request: ...``); updates that do not scale up (a rolling
restart, a new image) and the ``/scale`` subresource are not matched, so nothing else breaks.
A controller that must scale its workload back up (an operator after maintenance) is refused on
every reconcile.

The primitive creates the ConfigMap (``key``: the limit) in the target's namespace, then the policy
and its binding (cluster-wide, bound to the target's namespace only), as `kubectl create` would and
without the fault plane's labels; every name is journaled in the plan. Recover deletes the binding,
the policy, then the ConfigMap; it is idempotent, so `sregym cleanup` does the same after a crash.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (UserInputError, Verification, WorkloadEdit, WorkloadEditState, create_object,
                              delete_object, get_object, injector, resource)

NAME = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"
GROUP = "admissionregistration.k8s.io/v1"
POLICY = "ValidatingAdmissionPolicy"
BINDING = "ValidatingAdmissionPolicyBinding"
PLURALS = {"StatefulSet": "statefulsets", "Deployment": "deployments"}


class PolicyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field("replica-limits", pattern=NAME, description="name of the policy and of its binding")
    config_map: str = Field("scaling-limits", pattern=NAME, description="the ConfigMap holding the namespace's limit")
    key: str = Field("maxReplicas", pattern=r"^[A-Za-z][A-Za-z0-9]*$", description="its key")
    limit: int = Field(0, ge=0, description="the limit the namespace is left with")


class PolicyState(WorkloadEditState):
    manifests: list[dict[str, Any]] = Field(default_factory=list, description="ConfigMap, policy, binding, as created")


def expression(key: str) -> str:
    """Allowed: replicas within the limit, or an update that does not raise them."""
    limit = f"int(params.data.{key})"
    return (f"(request.operation == 'UPDATE' && object.spec.replicas <= oldObject.spec.replicas) "
            f"|| object.spec.replicas <= {limit}")


def manifests(name: str, namespace: str, kind: str, config_map: str, key: str, limit: int) -> list[dict]:
    """The ConfigMap, the policy and its binding, in creation order (the binding last: the policy
    acts only once bound)."""
    plural = PLURALS[kind]
    params = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": config_map, "namespace": namespace},
              "data": {key: str(limit)}}
    policy = {"apiVersion": GROUP, "kind": POLICY, "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                       "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                               "operations": ["CREATE", "UPDATE"],
                                                               "resources": [plural]}]},
                       "validations": [{"expression": expression(key), "reason": "Forbidden",
                                        "messageExpression": f"'{kind} replicas above the namespace limit of ' + "
                                                             f"params.data.{key} + ' are not allowed'"}]}}
    binding = {"apiVersion": GROUP, "kind": BINDING, "metadata": {"name": name},
               "spec": {"policyName": name, "validationActions": ["Deny"],
                        "paramRef": {"name": config_map, "parameterNotFoundAction": "Allow"},
                        "matchResources": {"namespaceSelector": {"matchLabels": {
                            "kubernetes.io/metadata.name": namespace}}}}}
    return [params, policy, binding]


def scale_up_refusal(kube: Any, workload: dict, replicas: int) -> str | None:
    """The API server's refusal of a copy of ``workload`` with ``replicas`` replicas (a server-side
    dry run of a create: every admission step runs, nothing is stored), or None if admitted."""
    meta = workload["metadata"]
    body = {"apiVersion": "apps/v1", "kind": workload["kind"],
            "metadata": {"generateName": f"{meta['name']}-", "namespace": meta["namespace"]},
            "spec": {**workload["spec"], "replicas": replicas}}
    try:
        resource(kube, workload["kind"]).create(body=body, namespace=meta["namespace"], dry_run="All")
    except ApiException as e:
        return f"{e.status} {(e.body or e.reason or '')[:300]}"
    return None


@injector("admission_policy")
class AdmissionPolicy(WorkloadEdit[PolicyParams]):
    """A ValidatingAdmissionPolicy, with the namespace's limit in a ConfigMap, refuses scaling the
    target's kind above the limit (0: any scale-up) in the target's namespace."""

    Params = PolicyParams
    State = PolicyState
    targets = tuple(PLURALS)
    summary = "a ValidatingAdmissionPolicy with a ConfigMap limit refuses scale-ups of the target's kind"

    def plan(self) -> PolicyState:
        kind, ns, obj, _ = self.locate()
        p = self.params
        for k, name, where in ((POLICY, p.name, None), (BINDING, p.name, None), ("ConfigMap", p.config_map, ns)):
            if get_object(self.ctx.kube, k, name, where) is not None:
                # recover deletes by name: it must never take an object the fault did not make
                raise UserInputError(f"params: a {k} named {name!r} already exists",
                                     hint="choose names no policy, binding or ConfigMap of the namespace has")
        return PolicyState(edits=[], workload=[kind, ns, obj["metadata"]["name"]],
                           manifests=manifests(p.name, ns, kind, p.config_map, p.key, p.limit))

    def inject(self, state: PolicyState) -> None:
        for m in state.manifests:
            create_object(self.ctx.kube, m)

    def verify(self, state: PolicyState) -> Verification:
        kind, ns, name = state.workload
        obj = get_object(self.ctx.kube, kind, name, ns)
        if obj is None:
            return Verification(False, f"{kind} {ns}/{name} does not exist")
        why = scale_up_refusal(self.ctx.kube, obj, self.params.limit + 1)
        ok = why is not None and f"ValidatingAdmissionPolicy '{self.params.name}'" in why
        return Verification(ok, f"a {kind} like {name} with {self.params.limit + 1} replicas: "
                                + (f"refused: {why}" if why else "admitted"))

    def recover(self, state: PolicyState) -> None:
        for m in reversed(state.manifests):
            meta = m["metadata"]
            delete_object(self.ctx.kube, m["kind"], meta["name"], meta.get("namespace"))
