"""Build images with podman (daemonless) and debootstrap, without any registry.

podman was chosen over a hand-started dockerd because it needs no daemon to start and stop: on
this VM a base import took 7 s and a Debian-package image FROM the base 20 s (see
docs/images.md). Names are always fully qualified (``docker.io/sregym/...``) so that the archive
imported into containerd carries the same reference a pod spec's ``sregym/<name>:<tag>`` resolves to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from sregym.core.errors import PrerequisiteError, SregymError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The VM's hard nofile limit is 20000; podman's default (1048576) makes runc fail.
ULIMITS = ("--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096")
# The host's trust settings, lent read-only to RUN steps and never committed into a layer: where
# HTTPS to PyPI passes a proxy with its own CA, `pip install` in a Dockerfile needs the host's CA
# bundle and pip's `cert =` setting, and an image must not carry either.
HOST_TRUST_FILES = (Path("/etc/ssl/certs/ca-certificates.crt"), Path("/etc/pip.conf"))


class ImageBuildError(SregymError):
    """An image failed to build; the message names the image and its log file."""

    exit_code = 4


def qualified(ref: str) -> str:
    """``sregym/x:t`` -> ``docker.io/sregym/x:t`` (what containerd and Kubernetes resolve it to)."""
    first = ref.split("/", 1)[0]
    if "/" in ref and ("." in first or ":" in first or first == "localhost"):
        return ref
    return "docker.io/" + ref


def apt_mirror(sources_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror apt is configured with (deb822 or one-line sources), for debootstrap."""
    files = [sources_dir / "sources.list", *sorted((sources_dir / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("deb ") and "/debian" in line and "security" not in line:
                return next(w for w in line.split()[1:] if "://" in w).rstrip("/")
        if "Suites:" in text and "bookworm" in text:
            for stanza in text.split("\n\n"):
                uris = [ln.split(":", 1)[1].strip() for ln in stanza.splitlines() if ln.startswith("URIs:")]
                if uris and "security" not in uris[0] and uris[0].rstrip("/").endswith("/debian"):
                    return uris[0].split()[0].rstrip("/")
    return DEFAULT_MIRROR


def debootstrap_command(rootfs: Path, suite: str, packages: list[str], mirror: str) -> list[str]:
    """The debootstrap command that makes the base root filesystem."""
    cmd = ["debootstrap", "--variant=minbase"]
    if packages:
        cmd.append("--include=" + ",".join(packages))
    return [*cmd, suite, str(rootfs), mirror]


def import_command(refs: tuple[str, ...]) -> list[str]:
    """podman import of a root filesystem tar on stdin, with the base image's config."""
    return ["podman", "import", "--change", 'CMD ["/bin/bash"]', "--change", "ENV LANG=C.UTF-8",
            # a root filesystem tar carries no PATH; without one, runc finds no command by name
            "--change", f"ENV PATH={DEFAULT_PATH}", "-", qualified(refs[0])]


def build_command(context: Path, refs: tuple[str, ...], trust_files: tuple[Path, ...] = ()) -> list[str]:
    """podman build of a standard Dockerfile; host networking so RUN apt-get/pip reach the mirrors."""
    cmd = ["podman", "build", "--network", "host", *ULIMITS, "--pull=never"]
    for path in trust_files:
        cmd += ["--volume", f"{path}:{path}:ro"]
    for ref in refs:
        cmd += ["-t", qualified(ref)]
    return [*cmd, "-f", str(context / "Dockerfile"), str(context)]


def save_command(archive: Path, refs: tuple[str, ...]) -> list[str]:
    """podman save of every tag of one image into one docker-archive (what ctr and kind import)."""
    return ["podman", "save", "-m", "--format", "docker-archive", "-o", str(archive), *(qualified(r) for r in refs)]


def require(tool: str, package: str) -> str:
    found = shutil.which(tool)
    if not found:
        raise PrerequisiteError(f"`{tool}` is not installed (needed to build images offline)",
                                hint=f"apt-get install -y {package}")
    return found


def _run(cmd: list[str], log: Path, what: str, stdin=None) -> None:
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=stdin)
    if proc.returncode != 0:
        raise ImageBuildError(f"{what} failed (exit {proc.returncode}); see {log}")


def has_image(ref: str) -> bool:
    return subprocess.run(["podman", "image", "exists", qualified(ref)], capture_output=True).returncode == 0


def untag(ref: str) -> None:
    """Drop one tag from podman's storage (its layers go once no other image uses them); a tag that
    is not there is no error."""
    subprocess.run(["podman", "rmi", "--ignore", qualified(ref)], capture_output=True)


def load(archive: Path, log: Path) -> None:
    """Put a cached archive back into podman's storage (a child is about to be built FROM it)."""
    _run(["podman", "load", "-i", str(archive)], log, f"podman load {archive}")


def build_base(refs: tuple[str, ...], suite: str, packages: list[str], archive: Path, log: Path) -> None:
    """debootstrap a minbase root filesystem, import it into podman, save it as ``archive``."""
    require("debootstrap", "debootstrap")
    require("podman", "podman")
    with tempfile.TemporaryDirectory(prefix="sregym-base-", dir=os.environ.get("TMPDIR")) as work:
        rootfs = Path(work) / "rootfs"
        _run(debootstrap_command(rootfs, suite, packages, apt_mirror()), log, f"debootstrap {suite}")
        # no package lists or caches in the image: children run `apt-get update` like anywhere
        for junk in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for path in (rootfs / junk).glob("*"):
                if path.is_file():
                    path.unlink()
        tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            _run(import_command(refs), log, "podman import of the base root filesystem", stdin=tar.stdout)
        finally:
            tar.stdout.close()
            tar.wait()
    for ref in refs[1:]:
        tag(refs[0], ref, log)
    save(refs, archive, log)


def tag(source: str, ref: str, log: Path) -> None:
    _run(["podman", "tag", qualified(source), qualified(ref)], log, f"podman tag {ref}")


def build_dockerfile(context: Path, refs: tuple[str, ...], archive: Path, log: Path) -> None:
    """podman build a Dockerfile context and save it as ``archive``."""
    require("podman", "podman")
    trust = tuple(p for p in HOST_TRUST_FILES if p.is_file())
    _run(build_command(context, refs, trust), log, f"podman build {context}")
    save(refs, archive, log)


def save(refs: tuple[str, ...], archive: Path, log: Path) -> None:
    partial = archive.with_name(archive.name + ".partial")
    partial.unlink(missing_ok=True)
    _run(save_command(partial, refs), log, f"podman save {refs[0]}")
    partial.rename(archive)
