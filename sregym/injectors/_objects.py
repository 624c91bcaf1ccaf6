"""Kubernetes object helpers shared by the primitives: find workloads and pods, edit fields.

Edits are recorded as plain data (kind, namespace, name, JSON path, before, after) so that
``plan`` can journal them and ``recover`` can restore ``before`` after a crash. Setting a field is
idempotent: applying the same edit twice leaves the same object.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError, UnprocessibleEntityError

from sregym.core.constants import HIDDEN_NAMESPACE, OWNER_LABEL, OWNER_VALUE, RUN_LABEL
from sregym.core.errors import FaultError, UserInputError
from sregym.core.problem import Selector

ABSENT = {"$absent": True}  # marks a field that did not exist (recover removes it)

API_VERSIONS = {
    "Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "ReplicaSet": "apps/v1",
    "ValidatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicy": "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicyBinding": "admissionregistration.k8s.io/v1",
    "Pod": "v1", "Service": "v1", "ConfigMap": "v1", "Secret": "v1", "PersistentVolumeClaim": "v1", "PersistentVolume": "v1",
    "Node": "v1", "Namespace": "v1", "ServiceAccount": "v1", "ResourceQuota": "v1", "LimitRange": "v1",
    "Endpoints": "v1", "Event": "v1", "Role": "rbac.authorization.k8s.io/v1", "RoleBinding": "rbac.authorization.k8s.io/v1",
    "NetworkPolicy": "networking.k8s.io/v1", "EndpointSlice": "discovery.k8s.io/v1",
    "FlowSchema": "flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration": "flowcontrol.apiserver.k8s.io/v1",
}
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
RESTART_ANNOTATION = "kubectl.kubernetes.io/restartedAt"  # what `kubectl rollout restart` sets
# Field managers a person's kubectl leaves on what it changes (the API server records them in
# managedFields, which the agent can read). Faults and noise use these, never the client
# library's default ("OpenAPI-Generator"), which no person leaves and so would point at the fault.
EDIT_MANAGER = "kubectl-edit"
RESTART_MANAGER = "kubectl-rollout"
CREATE_MANAGER = "kubectl-create"

T = TypeVar("T")


@lru_cache(maxsize=8)
def _dynamic(api_client: Any) -> DynamicClient:
    return DynamicClient(api_client)


def resource(kube: Any, kind: str, api_version: str | None = None):
    """The API resource of ``kind``; a custom resource (an operator's CR) names its ``api_version``."""
    return _dynamic(kube.api_client).resources.get(api_version=api_version or API_VERSIONS[kind], kind=kind)


def namespace_of(ctx: Any, target: Selector) -> str:
    return target.namespace or ctx.app_namespace


def get_object(kube: Any, kind: str, name: str, namespace: str | None, api_version: str | None = None) -> dict | None:
    """The object as a plain dict, or None if it does not exist."""
    try:
        return resource(kube, kind, api_version).get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None


def require_object(kube: Any, kind: str, name: str, namespace: str | None, where: str = "target",
                   api_version: str | None = None) -> dict:
    obj = get_object(kube, kind, name, namespace, api_version)
    if obj is None:
        raise UserInputError(f"{where}: {kind} {namespace + '/' if namespace else ''}{name} does not exist")
    return obj


def list_objects(kube: Any, kind: str, namespace: str | None, labels: dict[str, str] | None = None) -> list[dict]:
    selector = ",".join(f"{k}={v}" for k, v in (labels or {}).items()) or None
    return resource(kube, kind).get(namespace=namespace, label_selector=selector).to_dict()["items"]


def _pointer(path: list[str | int]) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def dig(obj: Any, path: list[str | int]) -> Any:
    """The value at ``path`` in ``obj``, or ``ABSENT``."""
    for p in path:
        try:
            obj = obj[p]
        except (KeyError, IndexError, TypeError):
            return ABSENT
    return obj


def field_manager(path: list[str | int]) -> str:
    """The manager a person's kubectl would leave for a change of ``path``: a rolling restart is
    `kubectl rollout restart`, any other field `kubectl edit`."""
    return RESTART_MANAGER if path == restart_path() else EDIT_MANAGER


def set_field(kube: Any, kind: str, name: str, namespace: str | None, path: list[str | int], value: Any,
              api_version: str | None = None) -> None:
    """Set (or, for ``ABSENT``, remove) one field with a JSON patch, under the field manager a
    person's kubectl would leave (:func:`field_manager`). Idempotent."""
    ptr = _pointer(path)
    if value == ABSENT:
        ops = [{"op": "remove", "path": ptr}]
    else:
        ops = [{"op": "replace" if isinstance(path[-1], int) else "add", "path": ptr, "value": value}]
    try:
        resource(kube, kind, api_version).patch(name=name, namespace=namespace, body=ops,
                                   content_type="application/json-patch+json", field_manager=field_manager(path))
    except UnprocessibleEntityError:
        if value != ABSENT:  # removing a field already gone is fine; anything else is not
            raise
    except NotFoundError:
        if value != ABSENT:
            raise FaultError(f"{kind} {namespace}/{name} disappeared while being changed") from None


def edit(kind: str, namespace: str | None, name: str, path: list[str | int], before: Any, after: Any,
         api_version: str | None = None) -> dict:
    """One journaled field change (``api_version`` only for kinds outside ``API_VERSIONS``: custom resources)."""
    out = {"kind": kind, "namespace": namespace, "name": name, "path": path, "before": before, "after": after}
    if api_version:
        out["api_version"] = api_version
    return out


RESTART_AFTER_RESTORE_SECONDS = 5.0


def undo_order(edits: list[dict]) -> list[dict]:
    """The order to undo ``edits`` in: reverse, except that rolling restarts come last. A restart
    undone first would start pods that read the faulty setting just before it is restored (env
    from a ConfigMap is read once, at container start) and then keep it."""
    backwards = list(reversed(edits))
    return [e for e in backwards if e["path"] != restart_path()] + [e for e in backwards if e["path"] == restart_path()]


def apply_edits(kube: Any, edits: list[dict], *, undo: bool = False) -> None:
    """Apply each edit's ``after`` in order, or (``undo``) each ``before`` in :func:`undo_order`;
    a rolling restart is undone by :func:`restart_undo_value` (one more restart), not by its ``before``."""
    ordered = undo_order(edits) if undo else edits
    # undo: kubelets read ConfigMaps from a watch cache, so the restored values get time to reach
    # it before the (last) restarts start pods that read them
    first_restart = next((i for i, e in enumerate(ordered) if e["path"] == restart_path()), 0) if undo else 0
    for i, e in enumerate(ordered):
        if i and i == first_restart:
            time.sleep(RESTART_AFTER_RESTORE_SECONDS)
        value = e["after"]
        if undo:
            value = restart_undo_value(e) if e["path"] == restart_path() else e["before"]
        try:
            set_field(kube, e["kind"], e["name"], e["namespace"], e["path"], value, e.get("api_version"))
        except FaultError:
            if not undo:
                raise  # undo: an object that is gone has nothing left to restore


FAULT_PLANE_LABELS = {OWNER_LABEL: OWNER_VALUE, RUN_LABEL: None}  # None: any value


def without_fault_plane_labels(manifest: dict) -> dict:
    """``manifest`` without the fault plane's own labels, unless it lives in the hidden namespace.

    An object a fault creates where the agent looks (a NetworkPolicy, a quota, a claim) must look
    like one a person made: no healthy namespace has an object labelled by the fault plane. Such
    objects are found again by the name journaled in the plan, not by label."""
    meta = manifest.get("metadata") or {}
    if meta.get("namespace") == HIDDEN_NAMESPACE or not meta.get("labels"):
        return manifest
    labels = {k: v for k, v in meta["labels"].items()
              if not (k in FAULT_PLANE_LABELS and FAULT_PLANE_LABELS[k] in (None, v))}
    meta = {k: v for k, v in meta.items() if k != "labels"} | ({"labels": labels} if labels else {})
    return {**manifest, "metadata": meta}


def create_object(kube: Any, manifest: dict) -> None:
    """Create ``manifest`` as `kubectl create` would (its field manager; outside the hidden
    namespace without the fault plane's labels); an existing object of that name is left as is."""
    manifest = without_fault_plane_labels(manifest)
    try:
        resource(kube, manifest["kind"]).create(body=manifest, namespace=manifest["metadata"].get("namespace"),
                                                field_manager=CREATE_MANAGER)
    except ApiException as e:
        if e.status != 409:
            raise


def delete_object(kube: Any, kind: str, name: str, namespace: str | None) -> None:
    try:
        resource(kube, kind).delete(name=name, namespace=namespace)
    except NotFoundError:
        pass


def find_workload(kube: Any, namespace: str, target: Selector, where: str = "target") -> tuple[str, dict]:
    """The one Deployment/StatefulSet/DaemonSet the selector names (by name or labels)."""
    kinds = [target.kind] if target.kind in WORKLOAD_KINDS else list(WORKLOAD_KINDS)
    found = []
    for kind in kinds:
        if target.name:
            obj = get_object(kube, kind, target.name, namespace)
            found += [(kind, obj)] if obj else []
        elif target.labels:
            found += [(kind, o) for o in list_objects(kube, kind, namespace, target.labels)]
    if len(found) != 1:
        what = "no workload" if not found else f"{len(found)} workloads"
        raise UserInputError(f"{where}: {what} in namespace {namespace} match {target.describe()}",
                             hint="name exactly one Deployment, StatefulSet or DaemonSet")
    return found[0]


def container_index(obj: dict, container: str | None, where: str = "target.container") -> int:
    containers = obj["spec"]["template"]["spec"]["containers"]
    if container is None:
        return 0
    for i, c in enumerate(containers):
        if c["name"] == container:
            return i
    raise UserInputError(f"{where}: no container {container!r} in {obj['kind']} {obj['metadata']['name']} "
                         f"(has {', '.join(c['name'] for c in containers)})")


def pods_of(kube: Any, workload: dict) -> list[dict]:
    """Live pods selected by a workload's selector (any phase)."""
    labels = workload["spec"]["selector"].get("matchLabels") or {}
    return list_objects(kube, "Pod", workload["metadata"]["namespace"], labels)


def restart_path() -> list[str]:
    return ["spec", "template", "metadata", "annotations"]


def restart_edits(workload: dict) -> list[dict]:
    """Edits that roll a workload's pods, like `kubectl rollout restart`.

    The stamp is now, but at least 2 s after the one the workload has: two faults that roll one
    workload within the same second (a retry storm's timeout and retries) must each really roll
    it, on inject and, through :func:`restart_undo_value` (the stamp plus 1 s), on recover. An
    equal stamp is no change of the template, so no rollout, and pods that read only some of the
    changed settings would keep running; an undo stamp equal to a later fault's inject stamp (1 s
    apart) would send the workload back to that fault's ReplicaSet, which may still hold its pods."""
    before = dig(workload, restart_path())
    after = dict(before) if before != ABSENT and before else {}
    stamp = datetime.now(timezone.utc).replace(microsecond=0)
    try:
        stamp = max(stamp, datetime.fromisoformat(after[RESTART_ANNOTATION]) + timedelta(seconds=2))
    except (KeyError, TypeError, ValueError):  # no stamp yet, or one not in ISO form: now is later
        pass
    after[RESTART_ANNOTATION] = stamp.isoformat(timespec="seconds")
    return [edit(workload["kind"], workload["metadata"]["namespace"], workload["metadata"]["name"],
                 restart_path(), before, after)]


def restart_undo_value(e: dict) -> dict:
    """What undoing a restart edit sets: the old template annotations and one more restart.

    Putting back the old annotations alone would return the workload to its old ReplicaSet, and
    that may hold pods started while the fault was in place (an agent that deleted every pod, or
    a rollout still under way when the setting changed): they keep the faulty setting they read at
    start. A new restart always starts fresh pods. Its stamp is the fault's own plus one second,
    so undoing twice changes nothing the second time.
    """
    before = dict(e["before"]) if e["before"] != ABSENT and e["before"] else {}
    stamp = datetime.fromisoformat(e["after"][RESTART_ANNOTATION]) + timedelta(seconds=1)
    return before | {RESTART_ANNOTATION: stamp.isoformat(timespec="seconds")}


def poll(check: Callable[[], T | None], timeout: float, interval: float = 2.0) -> T | None:
    """Call ``check`` until it returns something truthy or ``timeout`` passes; return its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
