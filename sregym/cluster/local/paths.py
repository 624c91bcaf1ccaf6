"""Where one local cluster keeps its state: one data directory per cluster name."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def state_root() -> Path:
    return Path(os.environ.get("SREGYM_STATE", "/var/lib/sregym"))


@dataclass(frozen=True)
class LocalPaths:
    name: str = "default"

    @property
    def root(self) -> Path:
        return state_root() / "clusters" / self.name

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pids(self) -> Path:
        return self.root / "pids"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def volumes(self) -> Path:
        """Backing directories of the node-local storage class (one per PersistentVolume)."""
        return self.root / "volumes"

    def log(self, component: str) -> Path:
        return self.logs / f"{component}.log"

    def pidfile(self, component: str) -> Path:
        return self.pids / f"{component}.pid"
