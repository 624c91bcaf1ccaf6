"""Which images the repository defines, and the hash of each one's inputs.

Two kinds of recipe:

* the base image, ``images/base/``: a Debian root filesystem made by ``debootstrap`` (no registry
  can be pulled from), described by ``images/base/packages.txt`` (one Debian package per line);
* every standard Dockerfile under ``images/<name>/Dockerfile`` or ``charts/<app>/images/<svc>/Dockerfile``
  (build context = that folder). Both are named by their folder (``<name>`` or ``<svc>``), so a
  chart refers to ``sregym/<svc>:<tag>``; two folders with one name are refused.

A Dockerfile folder with a ``context.txt`` is *assembled*: its build context also gets the
repository paths that file lists (under ``repo/``) and the binaries sregym builds (``binary
kubectl``, under ``bin/``). Such an image (sregym itself, for the nightly chart) is built only when
named (``sregym images build --only suite-runner``), never by a plain ``sregym images build``,
unless its listing has a line ``default`` (the agent's workbench: a few modules, needed by every run).

An image's input hash covers its recipe files and the input hashes of the sregym images it is built
``FROM``, so it is known before anything is built: charts can reference ``sregym/<name>:<hash12>``
and a rebuild with unchanged inputs is skipped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from sregym.core.errors import UserInputError

# Bump when the way images are built changes in a way their files do not show.
RECIPE_VERSION = "2"  # 2: the base image sets PATH
REPOSITORY_PREFIX = "sregym/"
BASE_NAME = "base"
BASE_SUITE = "bookworm"
# Files that never change what an image does.
_IGNORED_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".git"}
_IGNORED_SUFFIXES = {".pyc", ".pyo"}
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.IGNORECASE | re.MULTILINE)
# Words a tag must never carry: the agent can read image names (see DESIGN.md, Invariants).
_FORBIDDEN_WORDS = ("chaos", "fault", "inject")


@dataclass(frozen=True)
class ImageRecipe:
    """One image the repository defines."""

    name: str
    context: Path
    kind: str  # "debootstrap" | "dockerfile"
    parents: tuple[str, ...] = ()  # names of sregym images this one is built FROM
    # tag kept besides the hash tag, so a Dockerfile or a hand-run chart has a stable reference
    alias_tag: str = "latest"
    files: tuple[Path, ...] = field(default=(), compare=False)
    # assembled images: (repository path, path in the context) pairs and binaries (name, version)
    extra_files: tuple[tuple[Path, str], ...] = field(default=(), compare=False)
    binaries: tuple[tuple[str, str], ...] = ()
    built_by_default: bool = False  # an assembled image that a plain `sregym images build` builds too

    @property
    def assembled(self) -> bool:
        """Its build context gets repository files or sregym's binaries (see ``context.txt``)."""
        return bool(self.extra_files or self.binaries)

    @property
    def on_request(self) -> bool:
        """Built only when named: an assembled context usually copies much of the repository."""
        return self.assembled and not self.built_by_default

    @property
    def repository(self) -> str:
        return REPOSITORY_PREFIX + self.name


def context_files(context: Path) -> tuple[Path, ...]:
    """The files of a build context that can change the image, in a stable order."""
    found = []
    for path in sorted(context.rglob("*")):
        rel = path.relative_to(context)
        if any(part in _IGNORED_PARTS for part in rel.parts) or path.suffix in _IGNORED_SUFFIXES:
            continue
        if path.is_file():
            found.append(path)
    return tuple(found)


def sregym_parents(dockerfile_text: str) -> tuple[str, ...]:
    """Names of the sregym images a Dockerfile's FROM lines refer to (``sregym/<name>[:tag]``)."""
    parents = []
    for ref in _FROM.findall(dockerfile_text):
        ref = ref.removeprefix("docker.io/").removeprefix("localhost/")
        if ref.startswith(REPOSITORY_PREFIX):
            name = ref[len(REPOSITORY_PREFIX):].split(":", 1)[0].split("@", 1)[0]
            if name not in parents:
                parents.append(name)
    return tuple(parents)


def check_name(name: str, where: Path) -> None:
    """Refuse image names that are not valid references or that would tell the agent too much."""
    if not re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*", name):
        raise UserInputError(f"{where}: image name {name!r} is not a valid image name",
                             hint="use lower-case letters, digits, '-', '_' or '.' in the folder names")
    for word in _FORBIDDEN_WORDS:
        if word in name:
            raise UserInputError(f"{where}: image name {name!r} contains {word!r}",
                                 hint="agents can read image names; rename the folder to something neutral")


def discover(repo: Path) -> dict[str, ImageRecipe]:
    """Every image the repository at ``repo`` defines, keyed by name."""
    recipes: dict[str, ImageRecipe] = {}
    base = repo / "images" / BASE_NAME
    if (base / "packages.txt").is_file():
        recipes[BASE_NAME] = ImageRecipe(BASE_NAME, base, "debootstrap", alias_tag=BASE_SUITE,
                                         files=context_files(base))
    found = [(p.parent.name, p) for p in sorted(repo.glob("images/*/Dockerfile"))]
    found += [(p.parent.name, p) for p in sorted(repo.glob("charts/*/images/*/Dockerfile"))]
    for name, dockerfile in found:
        check_name(name, dockerfile)
        if name in recipes:
            raise UserInputError(f"{dockerfile}: image name {name!r} is defined twice "
                                 f"(also by {recipes[name].context})", hint="rename one of the folders")
        parents = sregym_parents(dockerfile.read_text())
        listing = dockerfile.parent / "context.txt"
        extra, binaries = assembled_context(repo, listing)
        recipes[name] = ImageRecipe(name, dockerfile.parent, "dockerfile", parents,
                                    files=context_files(dockerfile.parent), extra_files=extra, binaries=binaries,
                                    built_by_default=any(line == DEFAULT_DIRECTIVE for _, line in _listing_lines(listing)))
    for recipe in recipes.values():
        for parent in recipe.parents:
            if parent not in recipes:
                raise UserInputError(f"{recipe.context / 'Dockerfile'}: FROM {REPOSITORY_PREFIX}{parent} "
                                     f"is not an image this repository defines",
                                     hint=f"known images: {', '.join(sorted(recipes))}")
    return recipes


# binaries an assembled context may ask for: name -> (where sregym builds it, version)
def _binary_versions() -> dict[str, str]:
    from sregym.cluster.binaries import HELM, KUBERNETES, agent_proxy_binary

    # the agent API proxy's "version" is the hash of its sources (its cache folder's name)
    return {"kubectl": KUBERNETES.version, "helm": HELM.version, "agentproxy": agent_proxy_binary().parent.name}


DEFAULT_DIRECTIVE = "default"


def _listing_lines(listing: Path) -> list[tuple[int, str]]:
    """(line number, content) of a ``context.txt`` without comments and blank lines."""
    if not listing.is_file():
        return []
    lines = [(n, raw.split("#", 1)[0].strip()) for n, raw in enumerate(listing.read_text().splitlines(), 1)]
    return [(n, line) for n, line in lines if line]


def assembled_context(repo: Path, listing: Path) -> tuple[tuple[tuple[Path, str], ...], tuple[tuple[str, str], ...]]:
    """What ``listing`` (a ``context.txt``) adds to a build context: repository files (each with its
    path under ``repo/``) and binaries (name, version). Nothing when there is no listing."""
    files: list[tuple[Path, str]] = []
    binaries: list[tuple[str, str]] = []
    known = _binary_versions()
    for number, line in _listing_lines(listing):
        if line == DEFAULT_DIRECTIVE:
            continue
        where = f"{listing}:{number}"
        if line.startswith("binary "):
            name = line.split(None, 1)[1]
            if name not in known:
                raise UserInputError(f"{where}: unknown binary {name!r}", hint=f"known: {', '.join(sorted(known))}")
            binaries.append((name, known[name]))
            continue
        source = (repo / line).resolve()
        if not source.is_relative_to(repo) or not source.exists():
            raise UserInputError(f"{where}: {line!r} is not a path in the repository {repo}")
        for path in (context_files(source) if source.is_dir() else (source,)):
            files.append((path, "repo/" + path.relative_to(repo).as_posix()))
    return tuple(files), tuple(binaries)


def needs_binaries(name: str, recipes: dict[str, ImageRecipe]) -> bool:
    """Whether ``name``, or a parent it is built FROM, takes a binary sregym builds with Go."""
    recipe = recipes[name]
    return bool(recipe.binaries) or any(needs_binaries(parent, recipes) for parent in recipe.parents)


def build_order(recipes: dict[str, ImageRecipe], wanted: list[str] | None = None) -> list[ImageRecipe]:
    """Recipes in an order where each parent comes before its children (only ``wanted`` and their parents)."""
    order: list[ImageRecipe] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if any(r.name == name for r in order):
            return
        if name in visiting:
            raise UserInputError(f"image {name!r} is built FROM itself through its parents",
                                 hint="check the FROM lines of its Dockerfiles")
        visiting.add(name)
        for parent in recipes[name].parents:
            visit(parent)
        visiting.discard(name)
        order.append(recipes[name])

    names = wanted if wanted else sorted(n for n, r in recipes.items() if not r.on_request)
    for name in names:
        if name not in recipes:
            from sregym.core.errors import UnknownNameError

            raise UnknownNameError("image", name, list(recipes))
        visit(name)
    return order


def input_hash(recipe: ImageRecipe, recipes: dict[str, ImageRecipe], _memo: dict[str, str] | None = None) -> str:
    """sha256 of the recipe's files (names, contents, executable bits) and its parents' input hashes."""
    memo = {} if _memo is None else _memo
    if recipe.name in memo:
        return memo[recipe.name]
    digest = hashlib.sha256()
    digest.update(f"sregym-image {RECIPE_VERSION} {recipe.kind} {recipe.name}\n".encode())
    for parent in recipe.parents:
        digest.update(f"parent {parent} {input_hash(recipes[parent], recipes, memo)}\n".encode())
    for path in recipe.files:
        rel = path.relative_to(recipe.context).as_posix()
        mode = "x" if path.stat().st_mode & 0o111 else "-"
        digest.update(f"file {rel} {mode} {path.stat().st_size}\n".encode())
        digest.update(path.read_bytes())
    for path, dest in recipe.extra_files:
        mode = "x" if path.stat().st_mode & 0o111 else "-"
        digest.update(f"extra {dest} {mode} {path.stat().st_size}\n".encode())
        digest.update(path.read_bytes())
    for name, version in recipe.binaries:
        digest.update(f"binary {name} {version}\n".encode())
    memo[recipe.name] = digest.hexdigest()
    return memo[recipe.name]


def tags(recipe: ImageRecipe, digest: str) -> tuple[str, str]:
    """The two references an image is saved under: the input-hash tag and the stable alias tag."""
    return f"{recipe.repository}:{digest[:12]}", f"{recipe.repository}:{recipe.alias_tag}"
