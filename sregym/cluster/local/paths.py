"""Where one local cluster keeps its state: one data directory per cluster name."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def state_root() -> Path:
    return Path(os.environ.get("SREGYM_STATE", "/var/lib/sregym"))


def private_dir(path: Path) -> Path:
    """``path`` made if missing and readable by its owner only (0700), also when an older sregym
    left it open: the journals and records in it name what a run injects, which an agent placed on
    the host as another user (``--agent-host --run-as``) must not read."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        try:
            path.chmod(0o700)
        except PermissionError:  # another user's folder (a shared volume): its owner decides; each file is 0600
            pass
    return path


def private_append_line(path: Path, line: str) -> None:
    """Append ``line`` to ``path`` durably (the line fsync'd, and a new file's directory entry too),
    in a private folder (:func:`private_dir`), the file created readable by its owner only (0600)."""
    new = not path.exists()
    private_dir(path.parent)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
    if new:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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
