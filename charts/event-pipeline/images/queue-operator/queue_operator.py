"""The QueueCluster operator: keeps a NATS JetStream StatefulSet as its QueueCluster says, and
reports what runs in the CR's status.

It reconciles on every change of the CR and on a resync timer, so a change made to the
StatefulSet by hand (replicas, arguments, image) is put back within RESYNC_SECONDS: the CR is
the source of truth, as with any operator-managed store.
"""

from __future__ import annotations

import logging
import os

import kopf
from kubernetes import client, config as kubeconfig
from kubernetes.client.exceptions import ApiException
from prometheus_client import Counter, start_http_server

GROUP, VERSION, PLURAL = "pipeline.sregym.io", "v1", "queueclusters"
RESYNC_SECONDS = float(os.environ.get("RESYNC_SECONDS", "5"))
NATS_IMAGE = os.environ["NATS_IMAGE"]
PULL_POLICY = os.environ.get("IMAGE_PULL_POLICY", "Never")
MANAGED_BY = "queue-operator"
LOG = logging.getLogger("queue-operator")
RECONCILES = Counter("queuecluster_reconciles_total", "Reconciliations of QueueClusters, by outcome and action",
                     ["outcome", "action"])


def labels(name: str) -> dict:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "event-pipeline",
            "app.kubernetes.io/managed-by": MANAGED_BY}


def selector(name: str) -> dict:
    return {"app.kubernetes.io/name": name}


def container(spec: dict) -> dict:
    """The NATS server container a QueueCluster spec asks for."""
    port, monitor = spec.get("port", 4222), spec.get("monitorPort", 8222)
    js = spec.get("jetstream") or {}
    return {
        "name": "nats", "image": spec.get("image") or NATS_IMAGE, "imagePullPolicy": PULL_POLICY,
        "args": ["-p", str(port), "-m", str(monitor), "-js", "-sd", "/data", "-n", spec.get("serverName", "queue")],
        "ports": [{"name": "client", "containerPort": port}, {"name": "monitor", "containerPort": monitor}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "monitor"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "monitor"}, "periodSeconds": 15},
        "resources": spec.get("resources") or {},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "env": [{"name": "GOMEMLIMIT", "value": js.get("memoryLimit", "100MiB")}],
    }


def desired_statefulset(name: str, spec: dict) -> dict:
    storage = (spec.get("jetstream") or {}).get("storage", "256Mi")
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "labels": labels(name)},
        "spec": {
            "serviceName": name, "replicas": spec.get("replicas", 1),
            "selector": {"matchLabels": selector(name)},
            "template": {
                "metadata": {"labels": labels(name)},
                "spec": {"enableServiceLinks": False, "securityContext": {"fsGroup": 65534},
                         "containers": [container(spec)],
                         "volumes": [{"name": "data", "emptyDir": {"sizeLimit": storage}}]},
            },
        },
    }


def drift(current: client.V1StatefulSet, desired: dict) -> list[str]:
    """What of the desired state the running StatefulSet differs in (what the operator owns)."""
    out = []
    if current.spec.replicas != desired["spec"]["replicas"]:
        out.append(f"replicas {current.spec.replicas} -> {desired['spec']['replicas']}")
    have = {c.name: c for c in current.spec.template.spec.containers}
    want = desired["spec"]["template"]["spec"]["containers"][0]
    c = have.get(want["name"])
    if c is None:
        out.append("nats container missing")
    else:
        if c.image != want["image"]:
            out.append(f"image {c.image} -> {want['image']}")
        if list(c.args or []) != want["args"]:
            out.append(f"args {c.args} -> {want['args']}")
    return out


def reconcile(body: kopf.Body, spec: kopf.Spec, name: str, namespace: str, patch: kopf.Patch) -> None:
    """Make the StatefulSet what the QueueCluster asks for and report it in the status."""
    apps = client.AppsV1Api()
    desired = desired_statefulset(name, dict(spec))
    kopf.adopt(desired, owner=body)
    action = "none"
    try:
        try:
            current = apps.read_namespaced_stateful_set(name, namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            apps.create_namespaced_stateful_set(namespace, desired)
            LOG.info(f"created StatefulSet {namespace}/{name}")
            action, current = "create", None
        if current is not None:
            changes = drift(current, desired)
            if changes:
                apps.patch_namespaced_stateful_set(name, namespace, {"spec": {
                    "replicas": desired["spec"]["replicas"], "template": desired["spec"]["template"]}})
                LOG.info(f"StatefulSet {namespace}/{name} put back to its QueueCluster: {'; '.join(changes)}")
                action = "update"
            ready = current.status.ready_replicas or 0
        else:
            ready = 0
    except ApiException as e:
        RECONCILES.labels("error", action).inc()
        patch.status["phase"] = "Degraded"
        patch.status["message"] = f"cannot manage StatefulSet {name}: {e.status} {e.reason}"
        LOG.error(f"cannot manage StatefulSet {namespace}/{name}: {e.status} {e.reason}")
        raise kopf.TemporaryError(f"StatefulSet {name}: {e.status} {e.reason}", delay=RESYNC_SECONDS) from None
    RECONCILES.labels("ok", action).inc()
    want = desired["spec"]["replicas"]
    patch.status["replicas"] = want
    patch.status["readyReplicas"] = ready
    patch.status["phase"] = "Ready" if ready >= want and action == "none" else "Progressing"
    patch.status["message"] = f"{ready}/{want} servers ready"
    patch.status["observedGeneration"] = body.metadata.get("generation")


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_) -> None:
    kubeconfig.load_incluster_config()
    # no Kubernetes events: what it did is in its log and the CR status (and its Role stays one an SRE can restore)
    settings.posting.enabled = False
    # it watches its own namespace only (--namespace): no cluster-wide scan of namespaces or CRDs,
    # which its Role does not allow
    settings.scanning.disabled = True
    # one line per change made, not one per resync or probe
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    settings.persistence.progress_storage = kopf.StatusProgressStorage(field="status.operator")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="pipeline.sregym.io")
    start_http_server(int(os.environ.get("METRICS_PORT", "9102")))


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def on_change(body, spec, name, namespace, patch, **_) -> None:
    reconcile(body, spec, name, namespace, patch)


@kopf.timer(GROUP, VERSION, PLURAL, interval=RESYNC_SECONDS)
def resync(body, spec, name, namespace, patch, **_) -> None:
    reconcile(body, spec, name, namespace, patch)
