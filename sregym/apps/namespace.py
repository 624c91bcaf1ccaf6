"""The app namespace and its admission policy: Pod Security labels set before any pod exists.

The agent may create and patch workloads in the app namespace. Pod Security admission on the
namespace is what keeps those pods from escalating to the node (privileged, hostPath, hostPID,
hostNetwork, added capabilities): the API server refuses them, whoever asks. ``baseline`` is
enforced (every chart's pods meet it: their only host paths are PersistentVolumes, which Pod
Security does not look at, and some stores run as root); ``restricted`` is warned about and
audited, so its gaps show without breaking the apps. The fault plane's privileged pods live in the
hidden namespace, which carries no such labels.
"""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from sregym.cluster.handle import ClusterHandle
from sregym.core.errors import ClusterError

PSA = "pod-security.kubernetes.io"
ENFORCE_LEVEL = "baseline"
WARN_LEVEL = "restricted"


def pod_security_labels(enforce: str = ENFORCE_LEVEL, warn: str = WARN_LEVEL) -> dict[str, str]:
    """The Pod Security labels of an app namespace (levels pinned to the ``latest`` policy version)."""
    return {f"{PSA}/enforce": enforce, f"{PSA}/enforce-version": "latest",
            f"{PSA}/warn": warn, f"{PSA}/warn-version": "latest",
            f"{PSA}/audit": warn, f"{PSA}/audit-version": "latest"}


def ensure_app_namespace(cluster: ClusterHandle, namespace: str) -> bool:
    """Create ``namespace`` with the Pod Security labels, or put them on it when it exists (a reused
    namespace, or one helm or a user made without them). Returns True when it was created.

    Called before ``helm upgrade --install`` so no pod of the app is ever admitted unchecked."""
    core = cluster.kube.core
    labels = pod_security_labels()
    try:
        current = core.read_namespace(namespace)
    except ApiException as e:
        if e.status != 404:
            raise ClusterError(f"cannot read namespace {namespace}: {e.reason}") from None
        try:
            core.create_namespace({"metadata": {"name": namespace, "labels": labels}})
            return True
        except ApiException as e:
            if e.status != 409:  # created meanwhile by someone else: label it below
                raise ClusterError(f"cannot create namespace {namespace}: {e.reason}") from None
            current = core.read_namespace(namespace)
    if current.metadata.deletion_timestamp:
        raise ClusterError(f"namespace {namespace} is being deleted", hint=f"wait until `kubectl get namespace "
                           f"{namespace}` says NotFound, then deploy again")
    have = current.metadata.labels or {}
    if any(have.get(k) != v for k, v in labels.items()):
        try:
            core.patch_namespace(namespace, {"metadata": {"labels": labels}})
        except ApiException as e:
            raise ClusterError(f"cannot set the Pod Security labels of namespace {namespace}: {e.reason}") from None
    return False
