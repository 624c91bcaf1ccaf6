"""``quota_not_binding``: no ResourceQuota in the namespace is at (or near) its hard limit.

A quota binds when ``used`` reaches ``hard`` for a resource: new pods are refused. It counts as
fixed only while every tracked resource stays below ``hard * (1 - margin)`` over the window.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity
from pydantic import Field

from sregym.oracles import (CheckResult, MitigationOracle, WindowParams, get_json, list_json, mitigation_oracle,
                            sample_window, window_of, window_result)


class QuotaParams(WindowParams):
    name: str | None = Field(None, description="one ResourceQuota; default: every quota in the namespace")
    namespace: str | None = None
    margin: float = Field(0.0, ge=0, lt=1, description="headroom required below hard, as a share of hard")
    resources: list[str] = Field(default_factory=list, description="only these resources (e.g. pods, requests.cpu)")


def binding(quota: dict, margin: float, resources: list[str]) -> list[str]:
    """``quota/resource used/hard`` for every resource at or above ``hard * (1 - margin)``."""
    status = quota.get("status", {})
    hard, used = status.get("hard") or {}, status.get("used") or {}
    out = []
    for res, h in sorted(hard.items()):
        if resources and res not in resources:
            continue
        limit, now = parse_quantity(h), parse_quantity(used.get(res, "0"))
        if limit == 0 and res not in resources:
            continue  # "services.loadbalancers: 0" forbids a feature; it binds only if asked about
        if now >= limit * (1 - Decimal(str(margin))):
            out.append(f"{quota['metadata']['name']}/{res} used {used.get(res, '0')} of {h}")
    return out


@mitigation_oracle("quota_not_binding")
class QuotaNotBinding(MitigationOracle):
    """Every (selected) ResourceQuota keeps headroom over the whole window."""

    Params = QuotaParams

    def check(self) -> CheckResult:
        p = self.params
        ns = p.namespace or self.ctx.namespace

        def probe() -> tuple[bool, dict[str, Any]]:
            if p.name:
                q = get_json(self.ctx.kube, "resourcequota", p.name, ns)
                quotas = [q] if q else []
            else:
                quotas = list_json(self.ctx.kube, "resourcequotas", ns)
            bound = [b for q in quotas for b in binding(q, p.margin, p.resources)]
            return not bound, {"reason": "; ".join(bound)} if bound else {"quotas": len(quotas)}

        samples = sample_window(probe, window_of(p, self.ctx.window_seconds), p.interval_seconds,
                                min_pass_fraction=p.min_pass_fraction)
        return window_result(self.name, samples, p.min_pass_fraction, evidence={"namespace": ns})
