"""Put built image archives where a cluster's kubelet finds them (no registry is involved).

* local: ``ctr -a <socket> -n k8s.io images import`` into the cluster's own containerd;
* kind: ``kind load image-archive`` (needs Docker; cannot run on this VM, so only its command is tested);
* existing: a cluster we do not own must pull from a registry the user pushes to.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sregym.cluster.imagebuild.podman import ImageBuildError, qualified
from sregym.core.errors import PrerequisiteError, UserInputError

K8S_NAMESPACE = "k8s.io"


def ctr_command(socket: Path, *args: str) -> list[str]:
    return ["ctr", "-a", str(socket), "-n", K8S_NAMESPACE, *args]


def ctr_import_command(socket: Path, archive: Path) -> list[str]:
    # --no-unpack is not used: the kubelet would unpack on first use and the pod start would pay it
    return ctr_command(socket, "images", "import", str(archive))


def kind_load_command(cluster: str, archive: Path) -> list[str]:
    return ["kind", "load", "image-archive", str(archive), "--name", cluster]


class ContainerdImages:
    """The images of one local cluster's containerd (``k8s.io`` namespace)."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self._present: set[str] | None = None

    def _check(self) -> None:
        if shutil.which("ctr") is None:
            raise PrerequisiteError("`ctr` is not installed", hint="apt-get install -y containerd")
        if not self.socket.exists():
            raise PrerequisiteError(f"containerd socket {self.socket} does not exist",
                                    hint="bring the cluster up first (`sregym cluster up`) or pass --no-load")

    def present(self) -> set[str]:
        """References containerd already holds (read once per build)."""
        if self._present is None:
            self._check()
            proc = subprocess.run(ctr_command(self.socket, "images", "ls", "-q"), capture_output=True, text=True)
            if proc.returncode != 0:
                raise PrerequisiteError(f"cannot list images of containerd at {self.socket}: {proc.stderr.strip()}",
                                        hint="is the cluster's containerd running? (`sregym cluster status`)")
            self._present = set(proc.stdout.split())
        return self._present

    def has(self, refs: tuple[str, ...]) -> bool:
        return all(qualified(r) in self.present() for r in refs)

    def load(self, archive: Path, refs: tuple[str, ...], log: Path) -> None:
        self._check()
        cmd = ctr_import_command(self.socket, archive)
        with open(log, "a") as out:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise ImageBuildError(f"importing {archive} into containerd failed; see {log}")
        self.present().update(qualified(r) for r in refs)


class KindImages:
    """A kind cluster's nodes, loaded with ``kind load image-archive``."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster

    def has(self, refs: tuple[str, ...]) -> bool:
        return False  # kind itself skips layers a node already has

    def load(self, archive: Path, refs: tuple[str, ...], log: Path) -> None:
        if shutil.which("kind") is None:
            raise PrerequisiteError("`kind` is not installed", hint="install kind, or use --provider local")
        with open(log, "a") as out:
            proc = subprocess.run(kind_load_command(self.cluster, archive), stdout=out, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise ImageBuildError(f"kind load of {archive} into cluster {self.cluster!r} failed; see {log}")


def target(provider: str, cluster: str, socket: Path | None = None) -> ContainerdImages | KindImages:
    """Where images go for a cluster of ``provider`` named ``cluster``."""
    if provider == "local":
        if socket is None:
            from sregym.cluster.local.paths import LocalPaths

            socket = LocalPaths(cluster).containerd_socket
        return ContainerdImages(socket)
    if provider == "kind":
        return KindImages(cluster)
    if provider == "existing":
        raise UserInputError("images cannot be loaded into an existing cluster we do not run",
                             hint="build with --no-load, push the archives under $SREGYM_CACHE/images to a "
                                  "registry the cluster can pull from, and set the charts' image.repository")
    raise UserInputError(f"unknown provider {provider!r}", hint="use local, kind or existing")
