"""``pods_admitted``: the API server admits a new pod into the namespace.

A pod the namespace's controllers would create must pass admission (validating and mutating
webhooks, quotas, limit ranges, pod security). The check is a server-side dry run of a plain pod:
every admission step runs, including each webhook (a dry run still calls webhooks declaring
``sideEffects: None``), and nothing is stored. Running pods say nothing about this: they were
admitted before, and only their replacements will be refused.

With ``workload``, the pod tried is that Deployment's own template as it is now, what its
ReplicaSet will send next: a LimitRange judges a pod by its containers' limits, and one without
defaults gives a plain pod its maximum, so a plain pod is admitted where the workload's is not
(the anti-gaming matrix: recreating the namespace's objects brought the workload back before its
LimitRange, and a running target passed every other oracle while the cap stood again).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client import V1ObjectMeta, V1Pod
from kubernetes.client.exceptions import ApiException
from pydantic import Field

from sregym.oracles import CheckResult, MitigationOracle, WindowParams, mitigation_oracle, sample_window, window_of, window_result


class AdmittedParams(WindowParams):
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict, description="labels of the pod tried (default none)")
    image: str = Field("registry.k8s.io/pause:3.10", description="its image (a dry run pulls nothing)")
    workload: str | None = Field(None, description="try this Deployment's own pod template instead of a plain pod")


def dry_run_pod(namespace: str, labels: dict[str, str], image: str) -> dict:
    meta: dict[str, Any] = {"generateName": "admission-check-", "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": image}]}}


def refusal(e: ApiException) -> str:
    """The API server's reason for refusing, from the Status it returned."""
    try:
        return str(json.loads(e.body or "{}").get("message") or e.reason)[:300]
    except ValueError:
        return str(e.body or e.reason)[:300]


@mitigation_oracle("pods_admitted")
class PodsAdmitted(MitigationOracle):
    """A new pod in the namespace is admitted (server-side dry run) at every sample of the window."""

    Params = AdmittedParams

    def workload_pod(self, ns: str) -> V1Pod:
        """The next pod of ``workload``: its Deployment's pod template as it is now."""
        template = self.ctx.kube.apps.read_namespaced_deployment(self.params.workload, ns).spec.template
        labels = template.metadata.labels if template.metadata else None
        return V1Pod(metadata=V1ObjectMeta(generate_name=f"{self.params.workload}-", namespace=ns, labels=labels),
                     spec=template.spec)

    def check(self) -> CheckResult:
        p = self.params
        ns = p.namespace or self.ctx.namespace

        def probe() -> tuple[bool, dict[str, Any]]:
            try:
                body = self.workload_pod(ns) if p.workload else dry_run_pod(ns, p.labels, p.image)
            except ApiException as e:
                return False, {"reason": f"deployment/{p.workload} cannot be read (HTTP {e.status}): {refusal(e)}"}
            try:
                self.ctx.kube.core.create_namespaced_pod(ns, body, dry_run="All")
            except ApiException as e:  # whatever the reason, such a pod would not be created
                return False, {"reason": f"refused (HTTP {e.status}): {refusal(e)}"}
            return True, {"admitted": True}

        samples = sample_window(probe, window_of(p, self.ctx.window_seconds), p.interval_seconds,
                                min_pass_fraction=p.min_pass_fraction)
        return window_result(self.name, samples, p.min_pass_fraction, evidence={"namespace": ns})
