"""sregym running inside a pod of the cluster it tests (the nightly chart's suite runner, a suite
cell's Job): where it is, the kubeconfig it builds from its ServiceAccount, and the labels that let
the observability stack's fence admit it (charts/observability/templates/network-policies.yaml).

A conductor in a pod is admitted by its namespace's label together with its pod's label. The agent
can label neither: it may create and label pods only in its app namespace, and may not create or
label namespaces (sregym.cluster.agent_access); a conductor labels its own namespace
(:func:`admit_own_namespace`), and the pod label is in the Job and CronJob templates that create it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from sregym.core.errors import ClusterError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# On the conductor's namespace and on its pods (both); the observability chart admits exactly that pair
CONDUCTOR_LABEL = "sregym.dev/conductor"
CONDUCTOR_LABELS = {CONDUCTOR_LABEL: "true"}
# where a pod's sregym writes its kubeconfig (journals name it; a later pod of the cluster rewrites it)
KUBECONFIG = Path(tempfile.gettempdir()) / "sregym-in-cluster.kubeconfig"


def pod_namespace(account: Path = SERVICE_ACCOUNT) -> str | None:
    """The namespace of the pod this process runs in; None outside the cluster's pods."""
    try:
        namespace = (account / "namespace").read_text().strip()
    except OSError:
        return None
    return namespace if namespace and os.environ.get("KUBERNETES_SERVICE_HOST") else None


def kubeconfig_for_service_account(account: Path = SERVICE_ACCOUNT) -> dict[str, Any]:
    """A kubeconfig of this pod's ServiceAccount: the API server's in-cluster address, its CA, and the
    token by file (``tokenFile`` is read again as the projected token rotates)."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not (account / "token").is_file():
        raise ClusterError("not inside a pod with a ServiceAccount token: no in-cluster kubeconfig",
                           hint="pass --kubeconfig, or run `sregym cluster up`")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return {"apiVersion": "v1", "kind": "Config", "current-context": "in-cluster",
            "clusters": [{"name": "in-cluster", "cluster": {"server": server,
                                                            "certificate-authority": str(account / "ca.crt")}}],
            "users": [{"name": "service-account", "user": {"tokenFile": str(account / "token")}}],
            "contexts": [{"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "service-account"}}]}


def write_kubeconfig(path: Path | None = None, account: Path = SERVICE_ACCOUNT) -> Path:
    """Write :func:`kubeconfig_for_service_account` (helm and kubectl read a file) and return its path."""
    path = Path(path or KUBECONFIG)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig_for_service_account(account), sort_keys=False))
    path.chmod(0o600)
    return path


def admit_own_namespace(kube: Any, namespace: str) -> None:
    """Put the conductor label on this pod's own namespace (once), so the observability stack's fence
    admits this namespace's conductor pods. Only an identity that may patch namespaces (the
    conductor's, never the agent's) can do it."""
    from kubernetes.client.exceptions import ApiException

    try:
        labels = kube.core.read_namespace(namespace).metadata.labels or {}
        if labels.get(CONDUCTOR_LABEL) != CONDUCTOR_LABELS[CONDUCTOR_LABEL]:
            kube.core.patch_namespace(namespace, {"metadata": {"labels": CONDUCTOR_LABELS}})
    except ApiException as e:
        raise ClusterError(f"cannot label this conductor's namespace {namespace} with {CONDUCTOR_LABEL}=true "
                           f"({e.reason}): the observability stack would refuse its queries",
                           hint=f"kubectl label namespace {namespace} {CONDUCTOR_LABEL}=true, or grant the "
                                "conductor's ServiceAccount patch on namespaces") from None
