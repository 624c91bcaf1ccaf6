"""The namespace's pod admission webhook goes away: every new pod of the namespace is refused.

A common outage: a team runs a validating admission webhook (``failurePolicy: Fail``) for its
namespace, served by a small Deployment in that namespace. When the server has no backend (scaled
to zero, or its Service selects nothing), the API server cannot call it and refuses every pod the
namespace's controllers try to create ("failed calling webhook ..."). Running pods keep serving,
so nothing looks wrong until a pod has to be replaced: then it never comes back, and restarting
things makes it worse.

The primitive installs that webhook as the team would have it (a real HTTPS server speaking
``admission.k8s.io/v1`` ``AdmissionReview`` with a CA made at injection, the
``ValidatingWebhookConfiguration`` scoped to the namespace by ``namespaceSelector`` and leaving the
server's own pods out by ``objectSelector``), proves that it admits pods while it is up, then
breaks it (``how``) and deletes the target's pods, which their controller cannot recreate. Recover
deletes the configuration first (admission works again at once), then the server's objects; every
name is journaled in the plan, so `sregym cleanup` does the same after a crash.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (FaultError, UserInputError, Verification, WorkloadEdit, WorkloadEditState, apply_edits,
                              create_object, delete_object, edit, get_object, injector, list_objects, poll, require_object,
                              resource)

PORT = 8443
PATH = "/validate"
SERVER_FILE = "server.py"
SERVER_SOURCE = Path(__file__).with_name("_webhook_server.py").read_text()
WEBHOOK_CONFIG = "ValidatingWebhookConfiguration"


class WebhookParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field("pod-policy", pattern=r"^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$",
                      description="name of the webhook's Deployment, Service, Secret and ConfigMap in the namespace")
    how: Literal["no_backend", "service_selector"] = Field(
        "no_backend", description="no_backend: the server scaled to zero; service_selector: its Service selects no pod")
    image: str | None = Field(None, description="image of the server (needs python3); default: the target container's")
    timeout_seconds: int = Field(5, ge=1, le=30, description="the webhook call's timeout")
    delete_pods: bool = Field(True, description="delete the target's pods once the webhook is down")
    ready_timeout: float = Field(120.0, gt=0, description="how long the server may take to start")


class WebhookState(WorkloadEditState):
    namespace: str = ""
    manifests: list[dict[str, Any]] = Field(default_factory=list,
                                            description="what inject creates, in order (TLS filled in by inject)")
    pods: list[str] = Field(default_factory=list, description="the target's pods deleted (to be refused)")
    planned_at: str | None = Field(None, description="when planned (UTC): only refusals since count")


def dns_names(service: str, namespace: str) -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def serving_tls(service: str, namespace: str, days: int = 30) -> dict[str, bytes]:
    """A fresh CA and a serving certificate for the Service's DNS names, signed by it (PEM):
    ``ca`` (the webhook's caBundle), ``cert`` and ``key`` (the server's)."""
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{service}-ca")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = dns_names(service, namespace)
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[2])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return {"ca": ca.public_bytes(pem), "cert": cert.public_bytes(pem),
            "key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())}


def config_name(name: str, namespace: str) -> str:
    """The cluster-scoped configuration's name (one per namespace)."""
    return f"{name}.{namespace}"


def manifests(name: str, namespace: str, image: str, pull_policy: str | None, timeout_seconds: int) -> list[dict]:
    """Secret, ConfigMap, Deployment, Service and the webhook configuration, in creation order
    (the configuration last: only once its server answers may pods depend on it)."""
    labels = {"app": name}
    meta = lambda: {"name": name, "namespace": namespace, "labels": dict(labels)}  # noqa: E731
    container = {
        "name": "server", "image": image, "command": ["python3", f"/srv/{SERVER_FILE}"],
        "env": [{"name": "PORT", "value": str(PORT)}, {"name": "TLS_DIR", "value": "/tls"}],
        "ports": [{"name": "https", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": PORT, "scheme": "HTTPS"},
                           "periodSeconds": 2, "failureThreshold": 2},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "96Mi"}},
        "volumeMounts": [{"name": "server", "mountPath": "/srv", "readOnly": True},
                         {"name": "tls", "mountPath": "/tls", "readOnly": True}],
    }
    if pull_policy:
        container["imagePullPolicy"] = pull_policy
    return [
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta(),
         "data": {"tls.crt": "", "tls.key": ""}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(), "data": {SERVER_FILE: SERVER_SOURCE}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(),
         "spec": {"replicas": 1, "selector": {"matchLabels": dict(labels)},
                  "template": {"metadata": {"labels": dict(labels)},
                               "spec": {"terminationGracePeriodSeconds": 5, "automountServiceAccountToken": False,
                                        "containers": [container],
                                        "volumes": [{"name": "server", "configMap": {"name": name}},
                                                    {"name": "tls", "secret": {"secretName": name}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": meta(),
         "spec": {"selector": dict(labels), "ports": [{"name": "https", "port": 443, "targetPort": "https"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": WEBHOOK_CONFIG,
         "metadata": {"name": config_name(name, namespace), "labels": dict(labels)},
         "webhooks": [{
             "name": f"{name}.{namespace}.svc",
             "clientConfig": {"service": {"name": name, "namespace": namespace, "path": PATH, "port": 443},
                              "caBundle": ""},
             "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                        "resources": ["pods"], "scope": "Namespaced"}],
             "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
             # the server's own pods are left out, or it could never come back once down
             "objectSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": [name]}]},
             "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "timeoutSeconds": timeout_seconds}]},
    ]


def with_tls(objects: list[dict], tls: dict[str, bytes]) -> list[dict]:
    """``objects`` with the server's key pair in its Secret and the CA in the configuration."""
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    out = []
    for m in objects:
        if m["kind"] == "Secret":
            m = {**m, "data": {"tls.crt": b64(tls["cert"]), "tls.key": b64(tls["key"])}}
        elif m["kind"] == WEBHOOK_CONFIG:
            m = {**m, "webhooks": [{**w, "clientConfig": {**w["clientConfig"], "caBundle": b64(tls["ca"])}}
                                   for w in m["webhooks"]]}
        out.append(m)
    return out


def probe_pod(namespace: str) -> dict:
    """A pod that only a server-side dry run creates: what the API server would admit now."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "admission-check-", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def admission_refusal(kube: Any, namespace: str) -> str | None:
    """Why the API server refuses a new pod in ``namespace`` (a dry run), or None if it admits it."""
    try:
        kube.core.create_namespaced_pod(namespace, probe_pod(namespace), dry_run="All")
        return None
    except ApiException as e:
        try:  # the API server's Status names the webhook and why it could not be called
            return str(json.loads(e.body or "{}").get("message") or e.reason)[:400]
        except ValueError:
            return (e.body or e.reason or str(e.status))[:400]


def refusal_events(events: list[dict], name: str, since: str | None) -> list[dict]:
    """FailedCreate events naming the webhook, last seen at or after ``since`` (an earlier run's
    events outlive it by an hour and must not count)."""
    def last_seen(e: dict) -> str:
        return e.get("lastTimestamp") or e.get("eventTime") or (e.get("series") or {}).get("lastObservedTime") or ""

    return [e for e in events if e.get("reason") == "FailedCreate" and name in (e.get("message") or "")
            and (since is None or last_seen(e)[:19] >= since[:19])]


def refusal_conditions(replica_sets: list[dict], owner_uid: str, name: str, since: str | None) -> list[dict]:
    """ReplicaFailure conditions naming the webhook on the ReplicaSets of the Deployment ``owner_uid``,
    set at or after ``since``. The controller sets one when a pod creation fails and clears it at
    the next success, so it says "refused" when the events cannot: the controller-manager's event
    spam filter (25 events per object, then one per 5 minutes) drops a ReplicaSet's later
    FailedCreate events after a long refusal, which verify once waited for in vain."""
    found = []
    for rs in replica_sets:
        if not any(o.get("uid") == owner_uid for o in rs["metadata"].get("ownerReferences") or []):
            continue
        for c in (rs.get("status") or {}).get("conditions") or []:
            if (c.get("type") == "ReplicaFailure" and c.get("status") == "True" and name in (c.get("message") or "")
                    and (since is None or (c.get("lastTransitionTime") or "")[:19] >= since[:19])):
                found.append(c)
    return found


def refused_by_webhook(message: str | None, name: str) -> bool:
    return bool(message) and "failed calling webhook" in message and name in message


@injector("admission_webhook")
class AdmissionWebhook(WorkloadEdit[WebhookParams]):
    """Install the namespace's pod admission webhook (failurePolicy Fail), prove it admits pods, then
    take its backend away (``how``) and delete the target's pods: their controller cannot recreate
    them, and nothing else in the namespace can start a pod either."""

    Params = WebhookParams
    State = WebhookState

    def plan(self) -> WebhookState:
        p = self.params
        kind, ns, obj, i = self.locate()
        container = obj["spec"]["template"]["spec"]["containers"][i]
        objects = manifests(p.name, ns, p.image or container["image"],
                            None if p.image else container.get("imagePullPolicy"), p.timeout_seconds)
        taken = [f"{m['kind']}/{m['metadata']['name']}" for m in objects
                 if get_object(self.ctx.kube, m["kind"], m["metadata"]["name"], m["metadata"].get("namespace"))]
        if taken:
            raise UserInputError(f"params.name: {', '.join(taken)} already exist(s)",
                                 hint="choose another name, or run `sregym cleanup` if a run left them")
        pods = sorted(o["metadata"]["name"] for o in self.live_pods(
            WebhookState(workload=[kind, ns, obj["metadata"]["name"]]))) if p.delete_pods else []
        return WebhookState(edits=[], workload=[kind, ns, obj["metadata"]["name"]], container=container["name"],
                            namespace=ns, manifests=objects, pods=pods,
                            planned_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def inject(self, state: WebhookState) -> None:
        p, ns, kube = self.params, state.namespace, self.ctx.kube
        objects = with_tls(state.manifests, serving_tls(p.name, ns))
        for m in objects[:-1]:
            create_object(kube, m)
        if not poll(lambda: (get_object(kube, "Deployment", p.name, ns) or {}).get("status", {}).get("availableReplicas"),
                    p.ready_timeout):
            raise FaultError(f"the webhook server Deployment {ns}/{p.name} did not become available in "
                             f"{p.ready_timeout:.0f} s (its image must run python3)")
        create_object(kube, objects[-1])
        # pods are admitted with the webhook in place (once its backend is gone, the refusal below
        # proves the API server calls it: so the server did answer it before)
        if not poll(lambda: self._admitted(ns), 30.0, 1.0):
            raise FaultError(f"the API server does not admit pods through webhook {p.name}: "
                             f"{admission_refusal(kube, ns)}")
        # as a person's kubectl edit (its field manager: the agent reads managedFields)
        if p.how == "no_backend":
            apply_edits(kube, [edit("Deployment", ns, p.name, ["spec", "replicas"], 1, 0)])
            # a terminating server still answers through its Service until it exits (kube-proxy sends
            # to serving terminating endpoints when no ready one is left): a pod the target's controller
            # made in that window was admitted and would stay (seen live, five seconds after the plan)
            if not poll(lambda: not list_objects(kube, "Pod", ns, {"app": p.name}), p.ready_timeout, 1.0):
                raise FaultError(f"the webhook server's pods in {ns} did not go within {p.ready_timeout:.0f} s "
                                 f"of its Deployment {p.name} being scaled to 0")
        else:  # a renamed label: the Service selects no pod
            apply_edits(kube, [edit("Service", ns, p.name, ["spec", "selector", "app"], p.name, f"{p.name}-server")])
        if not poll(lambda: refused_by_webhook(admission_refusal(kube, ns), p.name), 60.0, 1.0):
            raise FaultError(f"pods are still admitted in {ns} after webhook {p.name} lost its backend")
        # the target's pods as they are now (a pod made since the plan would stay and serve)
        for pod in self._running(state) if state.pods else []:
            delete_object(kube, "Pod", pod["metadata"]["name"], ns)

    def _running(self, state: WebhookState) -> list[dict]:
        return [o for o in self.live_pods(state) if not o["metadata"].get("deletionTimestamp")]

    def _admitted(self, ns: str) -> bool:
        """A new pod is admitted while the configuration exists."""
        if admission_refusal(self.ctx.kube, ns) is not None:
            return False
        cfg = get_object(self.ctx.kube, WEBHOOK_CONFIG, config_name(self.params.name, ns), None)
        return bool(cfg)

    def verify(self, state: WebhookState) -> Verification:
        ns, name = state.namespace, self.params.name
        why = admission_refusal(self.ctx.kube, ns)
        refused = refused_by_webhook(why, name)
        alive = [f'{o["metadata"]["name"]} (created {o["metadata"].get("creationTimestamp")})' for o in self._running(state)]
        events = refusal_events(list_objects(self.ctx.kube, "Event", ns), name, state.planned_at)
        kind, _, target = state.workload
        conditions = []
        if kind == "Deployment":
            owner = require_object(self.ctx.kube, kind, target, ns)["metadata"]["uid"]
            conditions = refusal_conditions(list_objects(self.ctx.kube, "ReplicaSet", ns), owner, name,
                                            state.planned_at)
        ok = refused and (not state.pods or (not alive and bool(events or conditions)))
        return Verification(ok, f"new pods refused by the webhook: {refused} ({(why or 'admitted')[:160]}); "
                                f"target pods alive: {len(alive)} {alive or ''} (planned with {state.pods}, "
                                f"at {state.planned_at}); FailedCreate events naming it: {len(events)}; "
                                f"ReplicaFailure conditions naming it: {len(conditions)}")

    def recover(self, state: WebhookState) -> None:
        # the configuration first: from then on pods are admitted, whatever is left of the server
        for m in reversed(state.manifests):
            delete_object(self.ctx.kube, m["kind"], m["metadata"]["name"], m["metadata"].get("namespace"))
        if state.namespace:
            resync_short_controllers(self.ctx.kube, state.namespace)


RESYNC_ANNOTATION = "resync-requested-at"


def short_of_pods(controllers: list[dict]) -> list[dict]:
    """ReplicaSets and StatefulSets with fewer pods than they want."""
    return [c for c in controllers
            if int((c.get("spec") or {}).get("replicas") or 0) > int((c.get("status") or {}).get("replicas") or 0)]


def resync_short_controllers(kube: Any, namespace: str) -> list[str]:
    """Make the controllers that were refused pods try again now. Each refused creation doubled
    their retry delay (up to 1000 s), so after a long outage a ReplicaSet may wait minutes more
    once pods are admitted again; an update of the object queues it at once. The annotation is
    set and removed again: the object ends as it was."""
    touched = []
    for kind in ("ReplicaSet", "StatefulSet"):
        for c in short_of_pods(list_objects(kube, kind, namespace)):
            name = c["metadata"]["name"]
            api = resource(kube, kind)
            try:
                for value in (str(time.time()), None):  # as `kubectl annotate` would, then `... key-`
                    api.patch(name=name, namespace=namespace, content_type="application/merge-patch+json",
                              field_manager="kubectl-annotate",
                              body={"metadata": {"annotations": {RESYNC_ANNOTATION: value}}})
            except ApiException as e:
                if e.status != 404:
                    raise
                continue
            touched.append(f"{kind}/{name}")
    return touched


# kinds of the namespace's objects the primitive creates (the agent reads them all)
TELLING_FREE_KINDS = ("Deployment", "Service", "Secret", "ConfigMap", "Pod")
