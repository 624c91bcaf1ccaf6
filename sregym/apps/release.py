"""Helm releases of our apps: the values an install gets, its chart hash, and the helm calls."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import urllib3
import yaml

from sregym.apps.additions import additions, union_conflicts
from sregym.apps.spec import AppSpec
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.kube import helm_path
from sregym.core.errors import ClusterError, UnknownNameError

HASH_VALUE = ("sregym", "chartHash")
_NOT_CHART = {"images", "__pycache__", "sregym.yaml", ".helmignore"}


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` on top of ``base``, merging nested dicts (what Helm does with -f files)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def chart_hash(chart: Path, values: dict[str, Any]) -> str:
    """16 hex digits over the chart's template files and the install's values (images carry their
    own input-hash tags in ``values``, so a changed image changes the hash too)."""
    digest = hashlib.sha256()
    for path in sorted(chart.rglob("*")):
        rel = path.relative_to(chart)
        if path.is_file() and not _NOT_CHART & set(rel.parts):
            digest.update(f"{rel.as_posix()}\0".encode() + path.read_bytes() + b"\0")
    digest.update(json.dumps(values, sort_keys=True, separators=(",", ":")).encode())
    return digest.hexdigest()[:16]


def image_values(spec: AppSpec) -> dict[str, str]:
    """``images.<key>`` -> ``sregym/<image>:<input-hash>`` for every image the app declares."""
    from sregym.cluster.images import image_ref

    out = {}
    for key, image in spec.images.items():
        try:
            out[key] = image_ref(image)
        except UnknownNameError:
            continue  # not defined in this checkout: keep the chart's default reference
    return out


def storage_values(cluster: ClusterHandle) -> dict[str, Any]:
    """Use the cluster's default StorageClass when it has one; otherwise hostPath volumes under
    the cluster's data directory (the local cluster has no provisioner)."""
    for sc in cluster.kube.storage.list_storage_class().items:
        annotations = sc.metadata.annotations or {}
        if annotations.get("storageclass.kubernetes.io/is-default-class") == "true":
            return {}
    if cluster.data_dir is None:
        raise ClusterError(f"cluster {cluster.name} has no default StorageClass and no local data directory",
                           hint="mark a StorageClass default, or pass --set persistence.storageClassName=<class>")
    return {"persistence": {"hostPath": {"root": str(Path(cluster.data_dir) / "volumes")}}}


def helm(cluster: ClusterHandle, *args: str, input: str | None = None, timeout: float = 300
         ) -> subprocess.CompletedProcess[str]:
    """Run helm against ``cluster``; the caller checks the return code."""
    cmd = [helm_path(), *args, "--kubeconfig", str(cluster.kubeconfig)]
    if cluster.context:
        cmd += ["--kube-context", cluster.context]
    return subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=timeout)


def installed(cluster: ClusterHandle, release: str, namespace: str) -> tuple[str | None, str | None]:
    """(helm status of the release, chart hash it was installed with); (None, None) when absent."""
    proc = helm(cluster, "status", release, "-n", namespace, "-o", "json", timeout=60)
    if proc.returncode != 0:
        if "not found" in proc.stderr:
            return None, None
        raise ClusterError(f"helm cannot read release {release} in {namespace}: {proc.stderr.strip()[-500:]}")
    state = json.loads(proc.stdout).get("info", {}).get("status")
    vals = helm(cluster, "get", "values", release, "-n", namespace, "-o", "json", timeout=60)
    current = (json.loads(vals.stdout or "{}") or {}) if vals.returncode == 0 else {}
    return state, (current.get(HASH_VALUE[0]) or {}).get(HASH_VALUE[1])


def manifest(cluster: ClusterHandle, release: str, namespace: str) -> str | None:
    """The release's manifest (``helm get manifest``); None when there is no such release."""
    proc = helm(cluster, "get", "manifest", release, "-n", namespace, timeout=60)
    return proc.stdout if proc.returncode == 0 else None


def release_objects(cluster: ClusterHandle, release: str, namespace: str, *, text: str | None = None
                    ) -> set[tuple[str, str]] | None:
    """``(kind, name)`` of every object the release's manifest holds (``text``: that manifest, when
    the caller already read it); None when helm cannot say (no such release). What the agent made is
    what is in the namespace and not in here."""
    text = text if text is not None else manifest(cluster, release, namespace)
    if text is None:
        return None
    return {(doc["kind"], doc["metadata"]["name"]) for doc in yaml.safe_load_all(text)
            if isinstance(doc, dict) and doc.get("kind") and (doc.get("metadata") or {}).get("name")}


DIFF_OBJECTS_PER_CALL = 6  # kubectl diff dry-runs its objects one after another: a few per call, calls side by side


def drifted(cluster: ClusterHandle, release: str, namespace: str, *, text: str | None = None) -> list[str]:
    """Objects of the release whose live state differs from its manifest in a field the manifest
    sets (``kubectl diff``: the manifest applied as a server-side dry run, against the live
    objects), e.g. a Service that a test or a crashed run left with another targetPort. A reused
    release must be the chart, not what the last user left; ``["(unknown)"]`` when it cannot tell.
    ``text``: the release's manifest, when the caller already read it.

    Only what could have drifted is diffed: the objects' versions (:func:`object_version`) are
    read before each diff, and a clean diff is remembered with them (per cluster, release and
    manifest, in this process). An object that still has the version it had at a clean diff was
    reached by no write a diff could see since (a resourceVersion or a generation moves with every
    such write and never comes back), so it is still clean and is not diffed again; every other
    object is. A run's teardown diffs what the fault, its recovery and the agent touched, and the
    next run's prepare, a second later, what moved since (usually nothing: the versions only;
    ``kubectl diff`` of a whole hotel release was 2-3 s of every gym reset). A diff that found
    drift, or could not tell, forgets what was remembered: the next check diffs everything."""
    text = text if text is not None else manifest(cluster, release, namespace)
    if text is None:
        return ["(unknown)"]
    key = (str(getattr(cluster, "kubeconfig", "")), getattr(cluster, "context", None), release, namespace)
    digest = hashlib.sha256(text.encode()).hexdigest()
    items = live_items(cluster, text, namespace)  # before the diff: a write after it moves them
    versions = None if items is None else {k: object_version(v) if v else "" for k, v in items.items()}
    with _CLEAN_LOCK:
        known_digest, known = _CLEAN.pop(key, ("", {}))
    clean = {obj for obj, version in (versions or {}).items()
             if known_digest == digest and known.get(obj) == version}
    docs = {ns: [doc for doc in objs if object_key(doc, ns) not in clean]
            for ns, objs in by_namespace_docs(text, namespace).items()}
    found = diff_manifest(cluster, {ns: objs for ns, objs in docs.items() if objs})
    # what the diff cannot see: an entry no manifest had, which a merge keeps (an added env entry)
    if found != ["(unknown)"]:  # named as kubectl diff names them: apps.v1.Deployment.<ns>.<name>
        found = sorted(set(found) | {".".join((k[0].replace("/", "."), *k[1:])) for k in added_entries(docs, items)})
    if not found and versions is not None:
        with _CLEAN_LOCK:
            _CLEAN[key] = (digest, versions)
    return found


def object_key(doc: dict[str, Any], namespace: str) -> tuple[str, str, str, str]:
    """``(apiVersion, kind, namespace, name)`` of a manifest object (``namespace``: where it goes)."""
    return (str(doc.get("apiVersion", "")), str(doc.get("kind", "")), namespace,
            str((doc.get("metadata") or {}).get("name", "")))


# (kubeconfig, context, release, namespace) -> (manifest digest, object versions) of the last clean diff
_CLEAN: dict[tuple[str, str | None, str, str], tuple[str, dict[tuple[str, str, str, str], str]]] = {}
_CLEAN_LOCK = threading.Lock()


def live_items(cluster: ClusterHandle, manifest_text: str, namespace: str
               ) -> dict[tuple[str, str, str, str], dict[str, Any] | None] | None:
    """``(apiVersion, kind, namespace, name) -> the live object`` (None: not there) of every object of
    the manifest now, one list per kind and namespace through the API; None when a kind cannot be
    listed (then nothing is known)."""
    wanted: dict[tuple[str, str, str], list[str]] = {}
    for ns, docs in by_namespace_docs(manifest_text, namespace).items():
        for doc in docs:
            name = (doc.get("metadata") or {}).get("name")
            if not (doc.get("apiVersion") and doc.get("kind") and name):
                return None
            wanted.setdefault(object_key(doc, ns)[:3], []).append(name)
    kube = cluster.kube

    def listed(group: tuple[str, str, str]) -> dict[str, dict[str, Any]] | None:
        api_version, kind, ns = group
        plural, namespaced = kube.served_kinds(api_version).get(kind, ("", False))
        listing = kube.list_json(api_version, plural, ns if namespaced else None) if plural else None
        if listing is None:
            return None
        return {item["metadata"]["name"]: item for item in listing.get("items") or []}

    try:
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(wanted)))) as pool:
            listings = dict(zip(wanted, pool.map(listed, wanted)))
    except (ClusterError, OSError, ValueError, urllib3.exceptions.HTTPError):
        return None
    out: dict[tuple[str, str, str, str], dict[str, Any] | None] = {}
    for (api_version, kind, ns), names in wanted.items():
        live = listings[(api_version, kind, ns)]
        if live is None:
            return None
        out.update({(api_version, kind, ns, name): live.get(name) for name in names})
    return out


def live_versions(cluster: ClusterHandle, manifest_text: str, namespace: str
                  ) -> dict[tuple[str, str, str, str], str] | None:
    """``(apiVersion, kind, namespace, name) -> resourceVersion`` of every object of the manifest
    now (``""``: not there); None when a kind cannot be listed (then nothing is known, and nothing
    skipped)."""
    items = live_items(cluster, manifest_text, namespace)
    return None if items is None else {key: object_version(item) if item else "" for key, item in items.items()}


def added_entries(docs_by_namespace: dict[str, list[dict[str, Any]]],
                  items: dict[tuple[str, str, str, str], dict[str, Any] | None] | None
                  ) -> dict[tuple[str, str, str, str], list[tuple[str, list[dict[str, Any]]]]]:
    """Per object of ``docs_by_namespace``: what its live object (``items``) has that the manifest
    has not, in a list or map a merge keeps (:func:`sregym.apps.additions.additions`)."""
    out = {}
    for ns, docs in docs_by_namespace.items():
        for doc in docs:
            key = object_key(doc, ns)
            live = (items or {}).get(key)
            found = additions(doc, live) if live else []
            if found:
                out[key] = found
    return out


def _patch_found(cluster: ClusterHandle, release: str, namespace: str, find, doing: str) -> list[str]:
    """Patch each live object of the release by what ``find(manifest_doc, live)`` returns for it
    (``(what, JSON patch)`` pairs): one JSON patch per object. Returns the ``what``s; raises
    ClusterError naming the object and ``doing`` when a patch fails."""
    text = manifest(cluster, release, namespace)
    if text is None:
        return []
    items = live_items(cluster, text, namespace) or {}
    done = []
    for ns, docs in by_namespace_docs(text, namespace).items():
        for doc in docs:
            api_version, kind, ns_, name = key = object_key(doc, ns)
            found = find(doc, items[key]) if items.get(key) else []
            if not found:
                continue
            ops = [op for _, patch in found for op in patch]
            resource = f"{kind.lower()}.{api_version.split('/')[0]}" if "/" in api_version else kind.lower()
            proc = cluster.kube.kubectl("-n", ns_, "patch", resource, name, "--type=json", "-p", json.dumps(ops),
                                        check=False)
            if proc.returncode:
                raise ClusterError(f"{doing} {kind} {ns_}/{name}: {proc.stderr.strip()[:300]}")
            done += [what for what, _ in found]
    return done


def replace_union_conflicts(cluster: ClusterHandle, release: str, namespace: str) -> list[str]:
    """Put back the manifest's probe, lifecycle hook or volume where the live one holds another
    member of the field (:func:`sregym.apps.additions.union_conflicts`): helm's merge would add the
    chart's member beside it and the API refuse the upgrade. Run before the upgrade; one JSON patch
    per object, each guarded by a test of what it replaces. Returns what was put back."""
    return _patch_found(cluster, release, namespace, union_conflicts,
                        "putting back the chart's probes, hooks and volumes of")


def remove_additions(cluster: ClusterHandle, release: str, namespace: str) -> list[str]:
    """Remove what the release's live objects have that the chart's manifest has not (which an
    upgrade keeps): one JSON patch per object, each removal guarded by a test of what it removes.
    Returns what was removed; raises ClusterError when a patch fails."""
    return _patch_found(cluster, release, namespace, additions, "removing what was added (not in the chart) to")


def object_version(item: dict[str, Any]) -> str:
    """What changes with every write to the object that a diff could see. Its resourceVersion, but
    for an object with a ``metadata.generation`` (a workload, whose controller writes its status
    all the time, e.g. while a pod comes back after a recover): the generation, which the API moves
    on every change of the spec and never back, and a digest of the rest of its metadata (labels,
    annotations, owners) without the bookkeeping that status writes move."""
    meta = item.get("metadata") or {}
    if "generation" not in meta:
        return str(meta.get("resourceVersion", ""))
    rest = {k: v for k, v in meta.items() if k not in ("resourceVersion", "managedFields", "generation")}
    digest = hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    return f"g{meta['generation']}:{digest}"


def diff_manifest(cluster: ClusterHandle, docs_by_namespace: dict[str, list[dict[str, Any]]]) -> list[str]:
    """``kubectl diff`` of manifest objects (by the namespace they go to) against the live ones:
    what differs, ``["(unknown)"]`` when kubectl cannot tell; nothing to diff is nothing found."""
    found: set[str] = set()
    # kubectl diff refuses an object of another namespace than -n (the load generator's), and it
    # dry-runs each object in turn (a hotel-reservation release took 3-4 s in one call on a loaded
    # machine): a few objects per call, every call side by side
    parts = [(ns, chunk) for ns, docs in docs_by_namespace.items() for chunk in chunks(docs, DIFF_OBJECTS_PER_CALL)]
    if not parts:
        return []

    def diff(part: tuple[str, list[dict[str, Any]]]) -> Any:
        ns, docs = part
        return cluster.kube.kubectl("-n", ns, "diff", "-f", "-", input=yaml.safe_dump_all(docs), check=False,
                                    timeout=120)

    with ThreadPoolExecutor(max_workers=max(1, len(parts))) as pool:
        diffs = list(pool.map(diff, parts))
    for proc in diffs:
        if proc.returncode == 0:
            continue
        if proc.returncode != 1 or not proc.stdout.startswith("diff "):
            return ["(unknown)"]  # kubectl diff: 1 means differences, or an error (then no diff on stdout)
        # "diff -u -N /tmp/LIVE-1/v1.Service.hotel-reservation.geo /tmp/MERGED-2/..."
        found |= {line.split()[3].rsplit("/", 1)[-1] for line in proc.stdout.splitlines()
                  if line.startswith("diff ") and len(line.split()) > 4}
    return sorted(found)


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    """``items`` in consecutive lists of at most ``size`` (none when ``items`` is empty)."""
    return [items[i:i + size] for i in range(0, len(items), max(1, size))]


def by_namespace_docs(manifest_text: str, default: str) -> dict[str, list[dict[str, Any]]]:
    """A release manifest's objects by namespace (``default`` when one names none)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in yaml.safe_load_all(manifest_text):
        if doc:
            out.setdefault((doc.get("metadata") or {}).get("namespace") or default, []).append(doc)
    return out


# helm's message when values change a StatefulSet field the API server will not update in place
# (volumeClaimTemplates, serviceName, selector...)
_IMMUTABLE_STS = re.compile(r'cannot patch "([^"]+)" with kind StatefulSet: .*Forbidden: updates to statefulset spec')


def immutable_statefulsets(helm_stderr: str) -> list[str]:
    """StatefulSets an upgrade could not patch because it changed fields that cannot be updated."""
    return sorted(set(_IMMUTABLE_STS.findall(helm_stderr)))


def upgrade_install(cluster: ClusterHandle, spec: AppSpec, namespace: str, values: dict[str, Any]) -> None:
    """``helm upgrade --install`` with ``values`` on stdin (JSON is YAML: no --set escaping).

    Problems may deploy an app with values that change a StatefulSet's immutable fields (e.g. a
    memory-backed volume instead of a claim); the StatefulSet and its pods are then deleted (claims
    and data stay) and the upgrade retried once, as one does by hand."""
    def run() -> subprocess.CompletedProcess[str]:
        return helm(cluster, "upgrade", "--install", spec.name, str(spec.chart), "-n", namespace,
                    "--create-namespace", "-f", "-", input=json.dumps(values))

    proc = run()
    stuck = immutable_statefulsets(proc.stderr) if proc.returncode != 0 else []
    if stuck:
        for name in stuck:
            # with its pods (an orphaned pod adopted by the new StatefulSet is never rolled: it would
            # keep the old volumes, seen live); claims stay, so the data does
            cluster.kube.kubectl("-n", namespace, "delete", "statefulset", name, "--cascade=foreground",
                                 "--wait=true", check=False, timeout=180)
        proc = run()
    if proc.returncode != 0:
        raise ClusterError(f"helm could not install app {spec.name} into namespace {namespace}: "
                           f"{proc.stderr.strip()[-800:]}", hint=f"kubectl -n {namespace} get events")


def uninstall(cluster: ClusterHandle, release: str, namespace: str, *, wait: bool = True) -> bool:
    """Remove the release; False when there was none. With ``wait``, once its objects are gone."""
    proc = helm(cluster, "uninstall", release, "-n", namespace, *(["--wait"] if wait else []), "--timeout", "120s",
                timeout=180)
    if proc.returncode != 0:
        if "not found" in proc.stderr:
            return False
        raise ClusterError(f"helm could not uninstall {release} from {namespace}: {proc.stderr.strip()[-500:]}")
    return True
