"""Facts about the live cluster the integration tests share."""

from __future__ import annotations

from pathlib import Path

from sregym.cluster.local.paths import LocalPaths


def local_socket(cluster) -> Path | None:
    """The local cluster's containerd socket, also when the tests reach it as an `existing` cluster
    (SREGYM_TEST_KUBECONFIG); None when images cannot be loaded from this host."""
    if cluster.provider == "local" and cluster.data_dir:
        return cluster.data_dir / "containerd" / "containerd.sock"
    default = LocalPaths().containerd_socket
    return default if cluster.provider == "existing" and default.exists() else None
