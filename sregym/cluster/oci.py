"""Write single-purpose images as docker-archive tars and import them into containerd.

The cluster's own images (pause, CoreDNS) are one static binary each, so they are assembled
directly (a layer tar + config + manifest) without a Dockerfile builder. ``ctr images import``
reads the docker-archive format.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

from sregym.core.errors import ClusterError


def _layer_tar(files: dict[str, tuple[Path | bytes, int]]) -> bytes:
    """An uncompressed layer holding ``{path_in_image: (source file or bytes, mode)}``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({str(Path(p).parent) for p in files if str(Path(p).parent) not in (".", "/")})
        for d in dirs:
            info = tarfile.TarInfo(d.lstrip("/"))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for path, (src, mode) in sorted(files.items()):
            data = src.read_bytes() if isinstance(src, Path) else src
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_docker_archive(out: Path, repo_tag: str, files: dict[str, tuple[Path | bytes, int]], *,
                         entrypoint: list[str], cmd: list[str] | None = None, user: str | None = None,
                         exposed_ports: list[str] = ()) -> str:
    """Write ``out`` as a one-layer docker-archive image; return its config digest (its image id)."""
    layer = _layer_tar(files)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint, "Cmd": cmd, "User": user or "",
                   "ExposedPorts": {p: {} for p in exposed_ports} or None},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "sregym"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_digest = hashlib.sha256(config_bytes).hexdigest()
    manifest = [{"Config": f"{config_digest}.json", "RepoTags": [repo_tag], "Layers": [f"{diff_id[7:]}/layer.tar"]}]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        for name, data in ((f"{config_digest}.json", config_bytes), (f"{diff_id[7:]}/layer.tar", layer),
                           ("manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    tmp.rename(out)
    return f"sha256:{config_digest}"


def ctr(socket: Path, *args: str, namespace: str = "k8s.io", check: bool = True,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ctr", "-a", str(socket), "-n", namespace, *args], capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise ClusterError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def image_present(socket: Path, ref: str) -> bool:
    out = ctr(socket, "images", "ls", "-q", check=False).stdout.split()
    return ref in out


def import_archive(socket: Path, archive: Path) -> None:
    """Import a docker-archive or OCI tar into containerd's ``k8s.io`` namespace (what the CRI uses)."""
    ctr(socket, "images", "import", str(archive))
