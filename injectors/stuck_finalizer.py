"""An object deleted so that its controller makes it again, held in Terminating for ever by a
finalizer no running controller owns (an operator upgrade or uninstall left it behind).

Only the object's name stays taken: a StatefulSet being deleted no longer replaces its pods (its
controller only updates its status), and the operator that owns it sees it still there and makes
no new one. With ``cascade: foreground`` (``kubectl delete --cascade=foreground``) the garbage
collector deletes its pods first, so the outage starts at once; with ``background`` the pods run
until anything restarts them. Restarting pods never cures it: the object is below them.

Recover removes the finalizer (nothing else of the object was changed) and waits until the
object's controller has made it again: the world the fault started from, a new uid aside. If the
inject stopped before the delete, recover only takes the finalizer off. The target must have a
controller (an ``ownerReferences`` entry with ``controller: true``), or nothing would make it
again and the fault could not be undone.
"""

from __future__ import annotations

import time
from typing import Literal

from kubernetes.dynamic.exceptions import NotFoundError, UnprocessibleEntityError
from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (EDIT_MANAGER, FaultError, Injector, PlannedState, UserInputError, Verification, get_object, injector,
                              namespace_of, require_object, resource)

# a qualified name, as the API server wants finalizers: <domain>/<name>
FINALIZER = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"


class StuckFinalizerParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    finalizer: str = Field(..., pattern=FINALIZER, max_length=253,
                           description="the finalizer left on the object (domain/name) that no running controller removes")
    cascade: Literal["foreground", "background"] = Field(
        "foreground", description="how it is deleted, as `kubectl delete --cascade=`: foreground deletes its "
                                  "pods first; background leaves them running until something restarts them")
    api_version: str | None = Field(None, description="group/version for a kind outside the built-ins (a custom resource)")
    recreate_timeout_seconds: float = Field(120, gt=0, description="how long recover waits for the controller to make it again")


class StuckFinalizerState(PlannedState):
    kind: str = ""
    api_version: str | None = None
    namespace: str = ""
    name: str = ""
    uid: str = Field("", description="the object deleted (one made again has another uid)")
    finalizer: str = ""
    controller: str = Field("", description="kind/name of its controller, which makes it again")


def terminating_with(obj: dict | None, state: StuckFinalizerState) -> bool:
    """Whether ``obj`` is the planned object, being deleted and held by the finalizer."""
    meta = (obj or {}).get("metadata") or {}
    return (meta.get("uid") == state.uid and bool(meta.get("deletionTimestamp"))
            and state.finalizer in (meta.get("finalizers") or []))


@injector("stuck_finalizer")
class StuckFinalizer(Injector[StuckFinalizerParams]):
    """Delete an object its controller re-creates, leaving it Terminating on a finalizer nobody removes."""

    Params = StuckFinalizerParams
    State = StuckFinalizerState
    summary = "object stuck Terminating on an orphaned finalizer; its controller makes no replacement"

    def plan(self) -> StuckFinalizerState:
        p, t = self.params, self.target
        if not t.kind or not t.name:
            raise UserInputError("target: name the object's kind and name (e.g. kind: StatefulSet, name: queue)")
        ns = namespace_of(self.ctx, t)
        try:
            obj = require_object(self.ctx.kube, t.kind, t.name, ns, api_version=p.api_version)
        except (UserInputError, FaultError):
            raise
        except KeyError:
            raise UserInputError(f"target.kind: {t.kind} is not a built-in kind; give params.api_version") from None
        meta = obj["metadata"]
        where = f"{t.kind} {ns}/{t.name}"
        if meta.get("deletionTimestamp"):
            raise UserInputError(f"target: {where} is already being deleted")
        if p.finalizer in (meta.get("finalizers") or []):
            raise UserInputError(f"target: {where} already carries finalizer {p.finalizer}")
        owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
        if owner is None:
            raise UserInputError(f"target: {where} has no controller (no ownerReferences entry with controller: true), "
                                 "so nothing would make it again once deleted and the fault could not be undone",
                                 hint="target an object an operator or a built-in controller makes and owns")
        return StuckFinalizerState(kind=t.kind, api_version=p.api_version, namespace=ns, name=t.name, uid=meta["uid"],
                                   finalizer=p.finalizer, controller=f"{owner['kind']}/{owner['name']}")

    def _get(self, state: StuckFinalizerState) -> dict | None:
        return get_object(self.ctx.kube, state.kind, state.name, state.namespace, state.api_version)

    def _patch(self, state: StuckFinalizerState, ops: list[dict]) -> None:
        resource(self.ctx.kube, state.kind, state.api_version).patch(
            name=state.name, namespace=state.namespace, body=ops, content_type="application/json-patch+json",
            field_manager=EDIT_MANAGER)

    def inject(self, state: StuckFinalizerState) -> None:
        obj = self._get(state)
        if obj is None or obj["metadata"]["uid"] != state.uid:
            raise FaultError(f"{state.kind} {state.namespace}/{state.name} was replaced or removed before the fault "
                             "took hold")
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return  # already done (a finalizer cannot be added to an object being deleted)
        have = meta.get("finalizers")
        if state.finalizer not in (have or []):
            guard = {"op": "test", "path": "/metadata/uid", "value": state.uid}
            add = ({"op": "add", "path": "/metadata/finalizers/-", "value": state.finalizer} if have else
                   {"op": "add", "path": "/metadata/finalizers", "value": [state.finalizer]})
            self._patch(state, [guard, add])
        policy = "Foreground" if self.params.cascade == "foreground" else "Background"
        resource(self.ctx.kube, state.kind, state.api_version).delete(
            name=state.name, namespace=state.namespace,
            body={"propagationPolicy": policy, "preconditions": {"uid": state.uid}})

    def verify(self, state: StuckFinalizerState) -> Verification:
        obj = self._get(state)
        where = f"{state.kind} {state.name}"
        if terminating_with(obj, state):
            meta = obj["metadata"]
            return Verification(True, f"{where} terminating since {meta['deletionTimestamp']}, finalizers "
                                      f"{', '.join(meta['finalizers'])}")
        if obj is None or obj["metadata"]["uid"] != state.uid:
            return Verification(False, f"{where} is gone ({'made again' if obj else 'not made again yet'})")
        return Verification(False, f"{where} not being deleted, finalizers {obj['metadata'].get('finalizers') or []}")

    def recover(self, state: StuckFinalizerState) -> None:
        deleted = self._release(state)
        if deleted:
            self._await_replacement(state)

    def _release(self, state: StuckFinalizerState) -> bool:
        """Take the finalizer off the planned object; whether that object was deleted (or is gone)."""
        for _ in range(5):  # the test op fails if another writer moved the list meanwhile: read again
            obj = self._get(state)
            if obj is None or obj["metadata"]["uid"] != state.uid:
                return True
            meta = obj["metadata"]
            finalizers = meta.get("finalizers") or []
            if state.finalizer not in finalizers:
                return bool(meta.get("deletionTimestamp"))
            i = finalizers.index(state.finalizer)
            try:
                self._patch(state, [{"op": "test", "path": "/metadata/uid", "value": state.uid},
                                    {"op": "test", "path": f"/metadata/finalizers/{i}", "value": state.finalizer},
                                    {"op": "remove", "path": f"/metadata/finalizers/{i}"}])
            except NotFoundError:
                return True
            except UnprocessibleEntityError:
                continue
            else:
                return bool(meta.get("deletionTimestamp"))
        raise FaultError(f"cannot remove finalizer {state.finalizer} from {state.kind} {state.namespace}/{state.name}: "
                         "its finalizers kept changing", hint=f"kubectl -n {state.namespace} edit {state.kind.lower()} "
                                                              f"{state.name} and remove it by hand")

    def _await_replacement(self, state: StuckFinalizerState) -> None:
        deadline = time.monotonic() + self.params.recreate_timeout_seconds
        while True:
            obj = self._get(state)
            if obj is not None and obj["metadata"]["uid"] != state.uid:
                return
            if time.monotonic() >= deadline:
                what = "still being deleted" if obj else "gone"
                raise FaultError(f"{state.kind} {state.namespace}/{state.name} is {what} and its controller "
                                 f"{state.controller} has not made it again in {self.params.recreate_timeout_seconds:.0f} s",
                                 hint=f"kubectl -n {state.namespace} get {state.kind.lower()} {state.name} -o yaml; "
                                      f"is the controller of {state.controller} running?")
            time.sleep(2)
