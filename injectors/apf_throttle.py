"""API Priority and Fairness puts a workload's ServiceAccount in a priority level with no seats.

A team caps a client it thinks is noisy (or "less important") with a FlowSchema that sends the
client's ServiceAccount to its own PriorityLevelConfiguration (``flowcontrol.apiserver.k8s.io/v1``).
With ``nominalConcurrencyShares: 0``, nothing to lend or borrow and ``limitResponse: Reject`` the
level is what the API calls a "jail": its concurrency limit is zero seats, and the API server's
queue set then admits a request only while no other request of the level executes; any request
that arrives while one runs is answered 429 Too Many Requests at once. The FlowSchema and the level
are the fault; they persist as the real misconfiguration would (no pod holds them).

What it does not do (measured, docs/injectors.md): a client that sends one request at a time is
still served, only never two at once. The fault bites a client with concurrent demand (parallel
workers, informers starting together, a burst of reads); ``verify`` observes exactly that, a burst
of simultaneous requests made as the ServiceAccount, some of which the API server answers 429.

Both objects are created as `kubectl create` would, without the fault plane's labels (cluster-wide
objects a team makes carry none); their names are journaled in the plan, and recover deletes the
FlowSchema, then the level. Recover is idempotent, so `sregym cleanup` does the same after a crash.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (UserInputError, Verification, WorkloadEdit, WorkloadEditState, create_object,
                              delete_object, get_object, injector, poll)

NAME = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"
FLOW_SCHEMA = "FlowSchema"
PRIORITY_LEVEL = "PriorityLevelConfiguration"
# How many clients the verification runs together and for how long each keeps sending, and how long
# APF may take to pick up the new objects (its controller works from an informer: about a second
# here). One burst of 8 requests all refused by RBAC (403, < 1 ms each) was measured to overlap
# too little to meet a 429: the clients keep sending until one does.
BURST = 8
BURST_SECONDS = 2.0
# What they read: a document every authenticated client may read (system:discovery) and that takes
# the API server milliseconds to send, so requests overlap there. Measured: 1650 requests that RBAC
# refused in microseconds, from 8 Python clients (one interpreter lock), met no 429 at all.
PROBE_PATH = "/openapi/v3/apis/apps/v1"
VERIFY_SECONDS = 20.0


class ApfParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., pattern=NAME, description="name of the FlowSchema and of its PriorityLevelConfiguration")
    matching_precedence: int = Field(
        500, ge=2, le=8999, description="the FlowSchema's matchingPrecedence: below 9000, the suggested "
                                        "'service-accounts' schema every other ServiceAccount falls in")
    nominal_concurrency_shares: int = Field(0, ge=0, description="the level's shares of the server's seats "
                                                                 "(0: a level with no seats of its own)")


class ApfState(WorkloadEditState):
    service_account: str = ""
    manifests: list[dict[str, Any]] = Field(default_factory=list, description="level, then schema, as created")


def manifests(name: str, namespace: str, service_account: str, precedence: int, shares: int) -> list[dict]:
    """The PriorityLevelConfiguration and the FlowSchema sending every request of the ServiceAccount
    (any verb, resource, namespace or non-resource URL) to it, in creation order."""
    level = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": PRIORITY_LEVEL, "metadata": {"name": name},
             "spec": {"type": "Limited", "limited": {
                 "nominalConcurrencyShares": shares, "lendablePercent": 0, "borrowingLimitPercent": 0,
                 "limitResponse": {"type": "Reject"}}}}
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": FLOW_SCHEMA, "metadata": {"name": name},
              "spec": {"priorityLevelConfiguration": {"name": name}, "matchingPrecedence": precedence,
                       "distinguisherMethod": {"type": "ByUser"},
                       "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount":
                                                {"name": service_account, "namespace": namespace}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                     "clusterScope": True, "namespaces": ["*"]}],
                                  "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
    return [level, schema]


def rejected(statuses: list[int]) -> int:
    return sum(1 for s in statuses if s == 429)


@injector("apf_throttle")
class ApfThrottle(WorkloadEdit[ApfParams]):
    """Send the target workload's ServiceAccount to a PriorityLevelConfiguration with no seats that
    rejects (a FlowSchema + a level, both cluster-wide)."""

    Params = ApfParams
    State = ApfState
    summary = "a FlowSchema sends the workload's ServiceAccount to a zero-seat priority level (429 on concurrent requests)"

    def plan(self) -> ApfState:
        kind, ns, obj, _ = self.locate()
        sa = obj["spec"]["template"]["spec"].get("serviceAccountName") or "default"
        for k in (PRIORITY_LEVEL, FLOW_SCHEMA):
            if get_object(self.ctx.kube, k, self.params.name, None) is not None:
                # recover deletes by name: it must never take an object the fault did not make
                raise UserInputError(f"params.name: a {k} named {self.params.name!r} already exists",
                                     hint="choose a name no FlowSchema or PriorityLevelConfiguration has")
        made = manifests(self.params.name, ns, sa, self.params.matching_precedence,
                         self.params.nominal_concurrency_shares)
        return ApfState(edits=[], workload=[kind, ns, obj["metadata"]["name"]], service_account=sa, manifests=made)

    def inject(self, state: ApfState) -> None:
        for m in state.manifests:
            create_object(self.ctx.kube, m)

    def probe(self, state: ApfState) -> list[int]:
        """Statuses of a burst of simultaneous reads made as the ServiceAccount."""
        return self.ctx.kube.answers_as(state.workload[1], state.service_account, PROBE_PATH, at_once=BURST,
                                        seconds=BURST_SECONDS, until=429)

    def verify(self, state: ApfState) -> Verification:
        seen: list[int] = []

        def refused() -> bool:
            seen[:] = self.probe(state)
            return rejected(seen) > 0

        poll(refused, VERIFY_SECONDS, interval=1.0)
        ok = rejected(seen) > 0
        counts = {s: seen.count(s) for s in sorted(set(seen))}
        return Verification(ok, f"{rejected(seen)} of {len(seen)} requests of {BURST} simultaneous clients as "
                                f"ServiceAccount {state.workload[1]}/{state.service_account} answered 429 by flow "
                                f"control (statuses {counts})")

    def recover(self, state: ApfState) -> None:
        # the schema first: without it the account's requests are classified as before at once
        for m in reversed(state.manifests):
            delete_object(self.ctx.kube, m["kind"], m["metadata"]["name"], None)
