"""RBAC that breaks a workload's own access: a verb removed from the Role its ServiceAccount holds."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (UserInputError, Verification, WorkloadEdit, WorkloadEditState, edit, injector,
                              list_objects, require_object)


class RbacParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    verb: str = Field(..., description="verb the workload needs, e.g. get, list, watch")
    resource: str = Field(..., description="resource the workload needs, e.g. configmaps, pods")
    api_group: str = Field("", description="API group of the resource ('' = core)")


def revoke(rules: list[dict], verb: str, resource: str, group: str) -> list[dict]:
    """``rules`` without ``verb`` on ``resource`` (rules left with no verb are dropped)."""
    out = []
    for r in rules:
        covers = (resource in r.get("resources", []) or "*" in r.get("resources", [])) and \
                 (group in r.get("apiGroups", [""]) or "*" in r.get("apiGroups", []))
        if covers and verb in r.get("verbs", []):
            r = {**r, "verbs": [v for v in r["verbs"] if v != verb]}
        if covers and "*" in r.get("verbs", []):
            r = {**r, "verbs": [v for v in ("get", "list", "watch", "create", "update", "patch", "delete") if v != verb]}
        if r.get("verbs"):
            out.append(r)
    return out


class RbacState(WorkloadEditState):
    service_account: str = Field("", description="the service account whose permission is revoked")


@injector("rbac_revoke")
class RbacRevoke(WorkloadEdit[RbacParams]):
    """Take one permission away from the Roles bound to the workload's ServiceAccount."""

    Params = RbacParams
    State = RbacState

    def plan(self) -> RbacState:
        kind, ns, obj, _ = self.locate()
        sa = obj["spec"]["template"]["spec"].get("serviceAccountName") or "default"
        edits = []
        for rb in list_objects(self.ctx.kube, "RoleBinding", ns):
            bound = any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
                        and (s.get("namespace") or ns) == ns for s in rb.get("subjects") or [])
            if not bound or rb["roleRef"]["kind"] != "Role":
                continue
            role = require_object(self.ctx.kube, "Role", rb["roleRef"]["name"], ns)
            after = revoke(role.get("rules") or [], self.params.verb, self.params.resource, self.params.api_group)
            if after != role.get("rules"):
                edits.append(edit("Role", ns, role["metadata"]["name"], ["rules"], role.get("rules") or [], after))
        if not edits:
            raise UserInputError(f"target: no Role bound to ServiceAccount {ns}/{sa} grants {self.params.verb} "
                                 f"on {self.params.resource}", hint="grant through a namespaced Role first")
        return RbacState(edits=edits, workload=[kind, ns, obj["metadata"]["name"]], service_account=sa)

    def verify(self, state: RbacState) -> Verification:
        ns = state.workload[1]
        allowed = self.ctx.kube.can(ns, state.service_account, self.params.verb, self.params.resource,
                                    self.params.api_group)
        return Verification(not allowed, f"the API server {'allows' if allowed else 'denies'} "
                            f"{self.params.verb} {self.params.resource} to {state.service_account}")
