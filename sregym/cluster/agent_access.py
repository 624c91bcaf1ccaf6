"""The agent's rights: a ServiceAccount with what an on-call SRE of one app would have, used only
through the agent's API proxy (:mod:`sregym.cluster.agent_proxy`).

What the account may do (decided here, documented in docs/agents.md):

- in the app namespace: read everything an SRE reads (workloads, pods and their logs, services,
  endpoints, config maps, secrets of the app, events, PVCs, network policies, quotas, RBAC);
  change what an SRE changes (patch/update/scale/rollout workloads, delete pods and replica sets,
  edit config maps, secrets and services, create/delete network policies, fix Roles and
  RoleBindings, exec into pods, edit the custom resources the app's operators reconcile);
- in the observability namespace: read only (config maps included);
- cluster-wide: read what an on-call SRE reads in every namespace (pods and their logs, events,
  services, endpoints, workloads, PVCs, network policies...), nodes, namespaces, persistent
  volumes, storage classes, node and pod metrics, the API server's flow control (FlowSchemas and
  priority levels, read only);
- never: secrets or config maps outside the app and observability namespaces, RBAC objects outside
  the app namespace, the node proxy, writes outside the app namespace.

Kubernetes RBAC prevents escalation: the account can edit Roles in its namespace but cannot grant
rights it does not hold.

No credential of this account exists: the agent's kubeconfig holds a per-run token that only the
proxy accepts, and the proxy forwards with the conductor's credentials while impersonating this
account (:func:`agent_identity`). The proxy also removes the hidden fault-plane namespace from
everything it returns, which is why cluster-wide reads are safe to grant.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any, Protocol

import yaml
from kubernetes.client.exceptions import ApiException

from sregym.cluster.kube import Kube, not_found
from sregym.cluster.local.paths import state_root
from sregym.core.constants import HIDDEN_NAMESPACE, OBSERVABILITY_NAMESPACE, OWNER_LABEL, OWNER_VALUE
from sregym.core.errors import ClusterError, UserInputError

DEFAULT_NAME = "sre-oncall"
READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete"]
# Custom resources of the apps' operators (charts/event-pipeline/crds/).
OPERATOR_GROUP = "pipeline.sregym.io"
OPERATOR_RESOURCES = ["queueclusters", "queueclusters/status"]
FLOW_CONTROL_GROUP = "flowcontrol.apiserver.k8s.io"
FLOW_CONTROL_RESOURCES = ["flowschemas", "prioritylevelconfigurations"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def app_namespace_rules() -> list[dict[str, Any]]:
    """What the on-call SRE may do in the app's namespace."""
    return [
        _rule([""], ["pods", "pods/log", "pods/status", "services", "endpoints", "configmaps", "secrets", "events",
                     "persistentvolumeclaims", "serviceaccounts", "replicationcontrollers", "resourcequotas",
                     "limitranges"], READ),
        _rule([""], ["pods"], ["delete", "patch"]),
        _rule([""], ["pods/exec", "pods/eviction"], ["create"]),
        _rule([""], ["services", "configmaps", "secrets", "persistentvolumeclaims", "resourcequotas", "limitranges"],
              WRITE),
        _rule(["apps"], ["deployments", "statefulsets", "daemonsets", "replicasets", "controllerrevisions"], READ),
        _rule(["apps"], ["deployments", "statefulsets", "daemonsets"], ["create", "update", "patch"]),
        _rule(["apps"], ["replicasets"], ["delete", "patch"]),
        _rule(["apps"], ["deployments/scale", "statefulsets/scale", "replicasets/scale"], ["get", "update", "patch"]),
        _rule(["batch"], ["jobs", "cronjobs"], READ + ["delete", "patch"]),
        _rule(["networking.k8s.io"], ["networkpolicies", "ingresses"], READ + WRITE),
        _rule(["policy"], ["poddisruptionbudgets"], READ + WRITE),
        _rule(["autoscaling"], ["horizontalpodautoscalers"], READ + WRITE),
        _rule(["discovery.k8s.io"], ["endpointslices"], READ),
        _rule(["rbac.authorization.k8s.io"], ["roles", "rolebindings"], READ + WRITE),
        _rule(["metrics.k8s.io"], ["pods"], READ),
        _rule(["events.k8s.io"], ["events"], READ),
        # the custom resources an app's operators run its stores from (event-pipeline's QueueCluster):
        # an SRE fixes a store through its CR, since the operator puts back edits of what it manages.
        # Neither create nor delete: the operator's own objects are the app's, not the agent's.
        _rule([OPERATOR_GROUP], OPERATOR_RESOURCES, READ + ["update", "patch"]),
    ]


def observability_rules() -> list[dict[str, Any]]:
    """Read-only view of the observability stack (to check that it is not the broken part)."""
    return [
        _rule([""], ["pods", "pods/log", "services", "endpoints", "configmaps", "events"], READ),
        _rule(["apps"], ["deployments", "statefulsets", "daemonsets", "replicasets"], READ),
    ]


def cluster_rules() -> list[dict[str, Any]]:
    """Cluster-wide reads of an on-call SRE. Safe only behind the agent's API proxy, which removes
    the hidden namespace's objects from every answer; no secrets, config maps or RBAC objects."""
    return [
        _rule([""], ["pods", "pods/log", "services", "endpoints", "events", "persistentvolumeclaims",
                     "replicationcontrollers", "resourcequotas", "limitranges", "nodes", "namespaces",
                     "persistentvolumes"], READ),
        _rule(["apps"], ["deployments", "statefulsets", "daemonsets", "replicasets"], READ),
        _rule(["batch"], ["jobs", "cronjobs"], READ),
        _rule(["networking.k8s.io"], ["networkpolicies", "ingresses"], READ),
        _rule(["policy"], ["poddisruptionbudgets"], READ),
        _rule(["autoscaling"], ["horizontalpodautoscalers"], READ),
        _rule(["discovery.k8s.io"], ["endpointslices"], READ),
        _rule(["events.k8s.io"], ["events"], READ),
        _rule(["storage.k8s.io"], ["storageclasses"], READ),
        _rule(["metrics.k8s.io"], ["nodes", "pods"], READ),
        # the API server's flow control, to see why a client is answered 429; read only: a write would
        # let the agent route any client of the shared cluster (controllers, kubelets, Prometheus) to
        # a level that rejects it (docs/security.md, "API flow control")
        _rule([FLOW_CONTROL_GROUP], FLOW_CONTROL_RESOURCES, READ),
    ]


def agent_identity(namespace: str, name: str = DEFAULT_NAME) -> tuple[str, list[str]]:
    """The user and groups the proxy impersonates: exactly those of the ServiceAccount's own tokens."""
    return (f"system:serviceaccount:{namespace}:{name}",
            ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"])


class ProxyEndpoint(Protocol):
    """What a kubeconfig for the agent needs from its API proxy."""

    url: str
    ca_data: bytes
    token: str


def _labels() -> dict[str, str]:
    return {OWNER_LABEL: OWNER_VALUE}


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": _labels()}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _apply(create, replace, body: dict[str, Any], *args: Any) -> None:
    """Create, or replace when it exists (a re-run converges)."""
    try:
        create(*args, body=body)
    except ApiException as e:
        if e.status != 409:
            raise
        replace(body["metadata"]["name"], *args, body=body)


def cluster_scope_name(name: str, namespace: str) -> str:
    return f"{name}:{namespace}"


def access_directory(namespace: str) -> Path:
    """Default home of an agent kubeconfig: under the sregym state root, one folder per namespace."""
    return state_root() / "agent-access" / namespace


def grant_agent_access(kube: Kube, namespace: str, *, name: str = DEFAULT_NAME,
                       hidden_namespace: str = HIDDEN_NAMESPACE,
                       observability_namespace: str | None = OBSERVABILITY_NAMESPACE) -> tuple[str, list[str]]:
    """Create the agent's ServiceAccount and RBAC for ``namespace``; return the identity the proxy
    impersonates. No token is minted. Re-running converges (objects are replaced)."""
    if namespace == hidden_namespace or observability_namespace == hidden_namespace:
        raise UserInputError(f"namespace {namespace!r} is the hidden fault-plane namespace; the agent may never "
                             "be granted it", hint="deploy the app in its own namespace")
    rbac, core = kube.rbac, kube.core
    try:
        core.read_namespace(namespace)
    except ApiException as e:
        if not_found(e):
            raise ClusterError(f"namespace {namespace!r} does not exist; deploy the app before opening the agent plane") from None
        raise ClusterError(f"cannot read namespace {namespace!r}: {e.reason}") from None
    try:
        _apply(core.create_namespaced_service_account, core.replace_namespaced_service_account,
               {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace),
                "automountServiceAccountToken": False}, namespace)
        grants = [(namespace, app_namespace_rules())]
        if observability_namespace and _exists(core, observability_namespace):
            grants.append((observability_namespace, observability_rules()))
        subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
        for ns, rules in grants:
            role_name = name if ns == namespace else cluster_scope_name(name, namespace)
            _apply(rbac.create_namespaced_role, rbac.replace_namespaced_role,
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": _meta(role_name, ns),
                    "rules": rules}, ns)
            _apply(rbac.create_namespaced_role_binding, rbac.replace_namespaced_role_binding,
                   {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": _meta(role_name, ns), "subjects": subject,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name}}, ns)
        wide = cluster_scope_name(name, namespace)
        _apply(rbac.create_cluster_role, rbac.replace_cluster_role,
               {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta(wide),
                "rules": cluster_rules()})
        _apply(rbac.create_cluster_role_binding, rbac.replace_cluster_role_binding,
               {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _meta(wide),
                "subjects": subject,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": wide}})
    except ApiException as e:
        raise ClusterError(f"cannot create the agent's access in namespace {namespace!r}: {e.reason} "
                           f"(HTTP {e.status}) {(e.body or '')[:300]}") from None
    return agent_identity(namespace, name)


def create_agent_access(kube: Kube, namespace: str, directory: Path | None = None, *, proxy: ProxyEndpoint,
                        name: str = DEFAULT_NAME, hidden_namespace: str = HIDDEN_NAMESPACE,
                        observability_namespace: str | None = OBSERVABILITY_NAMESPACE) -> Path:
    """Grant the agent's rights (:func:`grant_agent_access`) and write its kubeconfig, which points
    at ``proxy`` (an open :class:`sregym.cluster.agent_proxy.AgentApiProxy`), to ``directory``
    (default :func:`access_directory`) as ``agent.kubeconfig``; return its path."""
    grant_agent_access(kube, namespace, name=name, hidden_namespace=hidden_namespace,
                       observability_namespace=observability_namespace)
    return write_kubeconfig((directory or access_directory(namespace)) / "agent.kubeconfig", proxy, namespace,
                            user=name)


def _exists(core: Any, namespace: str) -> bool:
    try:
        core.read_namespace(namespace)
        return True
    except ApiException as e:
        if not_found(e):
            return False
        raise


def write_kubeconfig(path: Path, proxy: ProxyEndpoint, namespace: str, *, user: str = DEFAULT_NAME) -> Path:
    """A kubeconfig with the proxy's URL, its CA and the proxy token (no credential the API server
    accepts); mode 0600."""
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": {"server": proxy.url, "certificate-authority-data":
                                                     base64.b64encode(proxy.ca_data).decode()}}],
        "users": [{"name": user, "user": {"token": proxy.token}}],
        "contexts": [{"name": user, "context": {"cluster": "cluster", "user": user, "namespace": namespace}}],
        "current-context": user,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.chmod(path, 0o600)
    return path


def revoke_agent_access(kube: Kube, namespace: str, *, name: str = DEFAULT_NAME,
                        observability_namespace: str | None = OBSERVABILITY_NAMESPACE,
                        kubeconfig: Path | None = None) -> None:
    """Delete what :func:`grant_agent_access` made (the proxy's impersonation is refused from then on). Idempotent."""
    rbac, core = kube.rbac, kube.core
    wide = cluster_scope_name(name, namespace)
    deletions = [
        (rbac.delete_cluster_role_binding, (wide,)),
        (rbac.delete_cluster_role, (wide,)),
        (rbac.delete_namespaced_role_binding, (name, namespace)),
        (rbac.delete_namespaced_role, (name, namespace)),
        (core.delete_namespaced_service_account, (name, namespace)),
    ]
    if observability_namespace:
        deletions += [(rbac.delete_namespaced_role_binding, (wide, observability_namespace)),
                      (rbac.delete_namespaced_role, (wide, observability_namespace))]
    for delete, args in deletions:
        try:
            delete(*args)
        except ApiException as e:
            if not not_found(e):
                raise ClusterError(f"cannot remove the agent's access ({delete.__name__} {args}): {e.reason}") from None
    if kubeconfig is not None:
        kubeconfig.unlink(missing_ok=True)
