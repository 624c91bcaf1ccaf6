"""``no_network_policy_denying``: the NetworkPolicies in force let the app's client reach its
server, over the window. Evaluated from the policies themselves with Kubernetes semantics
(:mod:`sregym.oracles._netpol`) for the real pods on both sides, so it holds on clusters whose
network plugin enforces policies and on ones where enforcement is emulated."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from sregym.oracles import (CheckResult, ClusterError, Endpoint, MitigationOracle, WindowParams, denying_policies,
                            get_json, list_json, mitigation_oracle, pods_matching, sample_window, window_of,
                            window_result, workload_labels)


class NetworkPolicyParams(WindowParams):
    namespace: str | None = None
    source_workload: str | None = Field(None, description="the client Deployment/StatefulSet")
    source_labels: dict[str, str] = Field(default_factory=dict, description="or: the client pods' labels")
    source_namespace: str | None = None
    service: str | None = Field(None, description="the server Service (its selector and ports are used)")
    target_labels: dict[str, str] = Field(default_factory=dict, description="or: the server pods' labels")
    port: int | str | None = Field(None, description="with target_labels; a number or a named container port")

    @model_validator(mode="after")
    def _sides(self) -> NetworkPolicyParams:
        if not (self.source_workload or self.source_labels):
            raise ValueError("give source_workload or source_labels")
        if not (self.service or (self.target_labels and self.port is not None)):
            raise ValueError("give service, or target_labels and port")
        return self


def named_ports(pod: dict) -> dict[str, int]:
    return {p["name"]: int(p["containerPort"]) for c in pod.get("spec", {}).get("containers", [])
            for p in c.get("ports") or [] if p.get("name")}


@mitigation_oracle("no_network_policy_denying")
class NoNetworkPolicyDenying(MitigationOracle):
    """No NetworkPolicy blocks the client pods from the server pods' port, at any sample."""

    Params = NetworkPolicyParams

    def _endpoint(self, pod: dict | None, labels: dict[str, str], ns: str) -> Endpoint:
        ns_obj = get_json(self.ctx.kube, "namespace", ns, None) or {}
        ns_labels = ns_obj.get("metadata", {}).get("labels") or {}
        if pod is None:
            return Endpoint(labels, ns, ns_labels)
        return Endpoint(pod["metadata"].get("labels") or {}, ns, ns_labels, pod.get("status", {}).get("podIP"),
                        named_ports(pod))

    def _target(self, ns: str) -> tuple[dict[str, str], list[tuple[int | str, str]]]:
        p = self.params
        if not p.service:
            return p.target_labels, [(p.port, "TCP")]
        svc = get_json(self.ctx.kube, "service", p.service, ns)
        if svc is None:
            raise ClusterError(f"Service {ns}/{p.service} does not exist")
        spec = svc.get("spec", {})
        ports = [(sp.get("targetPort", sp["port"]), sp.get("protocol", "TCP")) for sp in spec.get("ports") or []]
        return spec.get("selector") or {}, ports

    def check(self) -> CheckResult:
        p = self.params
        ns = p.namespace or self.ctx.namespace
        src_ns = p.source_namespace or ns

        def probe() -> tuple[bool, dict[str, Any]]:
            src_labels = p.source_labels or workload_labels(self.ctx.kube, src_ns, p.source_workload)
            dst_labels, ports = self._target(ns)
            sources = [self._endpoint(x, src_labels, src_ns) for x in pods_matching(self.ctx.kube, src_ns, src_labels)]
            targets = [self._endpoint(x, dst_labels, ns) for x in pods_matching(self.ctx.kube, ns, dst_labels)]
            sources = sources or [self._endpoint(None, src_labels, src_ns)]
            targets = targets or [self._endpoint(None, dst_labels, ns)]
            policies = list_json(self.ctx.kube, "networkpolicies", None)
            denied: set[str] = set()
            for s in sources:
                for t in targets:
                    for port, proto in ports:
                        num = port if isinstance(port, int) or str(port).isdigit() else t.named_ports.get(port)
                        if num is None:
                            denied.add(f"named port {port} not found on the server pods")
                            continue
                        denied.update(denying_policies(policies, s, t, int(num), proto))
            detail = {"policies": len(policies), "pairs": len(sources) * len(targets)}
            return not denied, detail | ({"reason": "denied by " + ", ".join(sorted(denied))} if denied else {})

        samples = sample_window(probe, window_of(p, self.ctx.window_seconds), p.interval_seconds,
                                min_pass_fraction=p.min_pass_fraction)
        return window_result(self.name, samples, p.min_pass_fraction, evidence={"namespace": ns})
