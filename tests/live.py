"""Facts about the live cluster the integration tests share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sregym.cluster.local.paths import LocalPaths


def local_socket(cluster) -> Path | None:
    """The local cluster's containerd socket, also when the tests reach it as an `existing` cluster
    (SREGYM_TEST_KUBECONFIG); None when images cannot be loaded from this host."""
    if cluster.provider == "local" and cluster.data_dir:
        return cluster.data_dir / "containerd" / "containerd.sock"
    default = LocalPaths().containerd_socket
    return default if cluster.provider == "existing" and default.exists() else None


@contextmanager
def agent_kubeconfig_for(cluster, namespace: str, directory: Path, **grant) -> Iterator[Path]:
    """The agent's kubeconfig as a run hands it over: its rights granted, its API proxy open on the
    node's address (reachable from pods); the proxy stopped and the rights revoked afterwards."""
    from sregym.cluster.agent_access import grant_agent_access, revoke_agent_access
    from sregym.cluster.agent_proxy import AgentApiProxy, proxy_listen_host, proxy_pki

    grant_agent_access(cluster.kube, namespace, **grant)
    path = Path(directory) / "agent.kubeconfig"
    try:
        with AgentApiProxy(cluster.kube, namespace, listen_host=proxy_listen_host(cluster), pki=proxy_pki(cluster),
                           kubeconfig_path=path) as proxy:
            yield proxy.kubeconfig
    finally:
        revoke_agent_access(cluster.kube, namespace, kubeconfig=path,
                            **{k: v for k, v in grant.items() if k == "observability_namespace"})
