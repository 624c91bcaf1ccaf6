"""Build the repository's images offline, cache them by input hash, load them into a cluster.

Every image is tagged twice: ``sregym/<name>:<hash12>`` (the first 12 hex digits of its input
hash, see :mod:`sregym.cluster.imagebuild.recipes`) and a stable alias (``sregym/base:bookworm``,
``sregym/<name>:latest``). Charts take ``image.repository``/``image.tag`` values: deployers pass
``image_ref(name)`` so that a changed image rolls the pods; a chart installed by hand can use
``latest`` with ``imagePullPolicy: Never``.

Archives live in ``$SREGYM_CACHE/images/<name>/<hash>.tar`` (docker-archive with both tags); an
image whose archive exists is not rebuilt, and it is imported into containerd only when containerd
lacks its hash tag.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from sregym.cluster.binaries import cache_root
from sregym.cluster.imagebuild import podman, recipes
from sregym.cluster.imagebuild.recipes import ImageRecipe
from sregym.cluster.imagebuild.runtime import target


def repo_root() -> Path:
    """The checkout that holds ``images/`` and ``charts/`` (the parent of the sregym package)."""
    return Path(__file__).resolve().parents[2]


def images_cache() -> Path:
    return cache_root() / "images"


@dataclass(frozen=True)
class BuiltImage:
    """One image after ``build_images``: where its archive is and what happened to it."""

    name: str
    refs: tuple[str, str]
    archive: Path
    status: str  # "built" | "cached"
    loaded: bool
    seconds: float


@lru_cache(maxsize=8)
def _hashes(repo: Path) -> dict[str, str]:
    found = recipes.discover(repo)
    memo: dict[str, str] = {}
    return {name: recipes.input_hash(r, found, memo) for name, r in found.items()}


def image_ref(name: str, repo: Path | None = None) -> str:
    """The reference a chart should use for image ``name``: ``sregym/<name>:<input-hash-12>``.

    Pure: computed from the repository's files, whether or not the image is built yet.
    """
    repo = (repo or repo_root()).resolve()
    hashes = _hashes(repo)
    if name not in hashes:
        from sregym.core.errors import UnknownNameError

        raise UnknownNameError("image", name, list(hashes))
    return f"{recipes.REPOSITORY_PREFIX}{name}:{hashes[name][:12]}"


def image_tag(name: str, repo: Path | None = None) -> str:
    """Only the tag part of :func:`image_ref` (what a chart's ``image.tag`` value takes)."""
    return image_ref(name, repo).rsplit(":", 1)[1]


def archive_path(name: str, digest: str) -> Path:
    return images_cache() / name / f"{digest}.tar"


def _base_packages(recipe: ImageRecipe) -> list[str]:
    lines = (recipe.context / "packages.txt").read_text().splitlines()
    return [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]


def build_images(
    only: list[str] | None = None,
    *,
    load: bool = True,
    without_binaries: bool = False,
    provider: str = "local",
    cluster: str = "default",
    socket: Path | None = None,
    repo: Path | None = None,
    on_event: Callable[[str, str], None] = lambda name, what: None,
) -> list[BuiltImage]:
    """Build (or reuse) the images named in ``only`` (all when empty) and their parents; load them.

    ``on_event(name, what)`` reports progress (``what`` is e.g. "building", "loading", "cached").
    ``without_binaries`` leaves out every image that takes a Go binary sregym builds (kubectl, helm,
    the agent proxy), so the rest can be built while those binaries are still compiling.
    """
    repo = (repo or repo_root()).resolve()
    found = recipes.discover(repo)
    order = recipes.build_order(found, only)
    if without_binaries:
        order = [r for r in order if not recipes.needs_binaries(r.name, found)]
    memo: dict[str, str] = {}
    digests = {r.name: recipes.input_hash(r, found, memo) for r in order}
    runtime = target(provider, cluster, socket) if load else None
    results: list[BuiltImage] = []
    for recipe in order:
        started = time.monotonic()
        digest = digests[recipe.name]
        refs = recipes.tags(recipe, digest)
        archive = archive_path(recipe.name, digest)
        archive.parent.mkdir(parents=True, exist_ok=True)
        log = archive.with_suffix(".log")
        status = "cached"
        with _image_lock(archive.parent):
            if not archive.is_file():
                _build_one(recipe, found, digests, archive, log, on_event)
                status = "built"
                prune_archives(archive, recipe.repository)
        loaded = False
        if runtime is not None and not runtime.has(refs):
            on_event(recipe.name, "loading")
            runtime.load(archive, refs, log)
            loaded = True
        on_event(recipe.name, status)
        results.append(BuiltImage(recipe.name, refs, archive, status, loaded, time.monotonic() - started))
    return results


KEPT_ARCHIVES = 3
"""Archives kept per image: the one just built and the newest others (another checkout's, a branch
switched back to). An image that ships the repository (suite-runner) gets a new input hash with
every commit, 0.8 GB each: without a bound the cache grew by that much per CI run."""


def prune_archives(keep: Path, repository: str, kept: int = KEPT_ARCHIVES) -> list[Path]:
    """Remove all but the ``kept`` newest archives beside ``keep`` (``keep`` always stays), with their
    build record and log, and their hash tag from podman's storage. Called under the image's lock.
    Returns the archives removed."""
    others = sorted((p for p in keep.parent.glob("*.tar") if p != keep),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    removed = others[max(kept - 1, 0):]
    for old in removed:
        for path in (old, old.with_suffix(".json"), old.with_suffix(".log")):
            path.unlink(missing_ok=True)
        podman.untag(f"{repository}:{old.stem[:12]}")
    return removed


@contextmanager
def _image_lock(directory: Path):
    """One builder per image at a time: parallel test sessions and shells share the cache."""
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build_one(recipe: ImageRecipe, found: dict[str, ImageRecipe], digests: dict[str, str], archive: Path,
               log: Path, on_event: Callable[[str, str], None]) -> None:
    started = time.monotonic()
    digest = digests[recipe.name]
    refs = recipes.tags(recipe, digest)
    log.write_text("")
    # children are built FROM their parents, which must be in podman's own storage
    for parent in recipe.parents:
        parent_refs = recipes.tags(found[parent], digests[parent])
        if not podman.has_image(parent_refs[0]):
            on_event(recipe.name, f"restoring {parent}")
            podman.load(archive_path(parent, digests[parent]), log)
        # the Dockerfile says FROM <alias>: point the alias at this exact parent
        podman.tag(parent_refs[0], parent_refs[1], log)
    on_event(recipe.name, "building")
    if recipe.kind == "debootstrap":
        podman.build_base(refs, recipes.BASE_SUITE, _base_packages(recipe), archive, log)
    elif recipe.assembled:
        with tempfile.TemporaryDirectory(prefix=f"sregym-{recipe.name}-") as tmp:
            podman.build_dockerfile(assemble(recipe, Path(tmp)), refs, archive, log)
    else:
        podman.build_dockerfile(recipe.context, refs, archive, log)
    (archive.with_suffix(".json")).write_text(json.dumps(
        {"name": recipe.name, "refs": refs, "input_hash": digest,
         "seconds": round(time.monotonic() - started, 1), "bytes": archive.stat().st_size}, indent=1))


def assemble(recipe: ImageRecipe, into: Path) -> Path:
    """An assembled image's build context: its folder, the repository files and the binaries."""
    from sregym.cluster.kube import helm_path, kubectl_path

    shutil.copytree(recipe.context, into, dirs_exist_ok=True)
    for path, dest in recipe.extra_files:
        (into / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, into / dest)
    from sregym.cluster.binaries import build_agent_proxy

    where = {"kubectl": kubectl_path, "helm": helm_path, "agentproxy": build_agent_proxy}
    (into / "bin").mkdir(exist_ok=True)
    for name, _ in recipe.binaries:
        shutil.copy2(where[name](), into / "bin" / name)
    return into


def known_images(repo: Path | None = None) -> list[str]:
    """Names of every image the repository defines."""
    return sorted(recipes.discover((repo or repo_root()).resolve()))
