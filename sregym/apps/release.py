"""Helm releases of our apps: the values an install gets, its chart hash, and the helm calls."""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

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
    ``text``: the release's manifest, when the caller already read it."""
    text = text if text is not None else manifest(cluster, release, namespace)
    if text is None:
        return ["(unknown)"]
    found: set[str] = set()
    # kubectl diff refuses an object of another namespace than -n (the load generator's), and it
    # dry-runs each object in turn (a hotel-reservation release took 3-4 s in one call on a loaded
    # machine): a few objects per call, every call side by side
    parts = [(ns, chunk) for ns, docs in by_namespace_docs(text, namespace).items()
             for chunk in chunks(docs, DIFF_OBJECTS_PER_CALL)]

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


def uninstall(cluster: ClusterHandle, release: str, namespace: str) -> bool:
    """Remove the release; False when there was none."""
    proc = helm(cluster, "uninstall", release, "-n", namespace, "--wait", "--timeout", "120s", timeout=180)
    if proc.returncode != 0:
        if "not found" in proc.stderr:
            return False
        raise ClusterError(f"helm could not uninstall {release} from {namespace}: {proc.stderr.strip()[-500:]}")
    return True
