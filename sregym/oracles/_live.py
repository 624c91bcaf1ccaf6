"""Read-only access to the live cluster for mitigation oracles: objects as JSON, pods, exec.

Objects are read with the cluster's kubectl (``-o json``) so that any kind a problem names,
custom resources included, works the same way; an oracle never writes to the app's objects.
"""

from __future__ import annotations

import json
from typing import Any

from sregym.core.errors import ClusterError

_NOT_FOUND = ("NotFound", "not found")


def selector_string(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def get_json(kube: Any, kind: str, name: str, namespace: str | None, *, managed_fields: bool = False) -> dict | None:
    """The object as a dict, or ``None`` when it does not exist. ``managed_fields``: keep
    ``metadata.managedFields`` (who wrote which field, and when), which kubectl drops by default."""
    args = ["get", kind, name, "-o", "json"] + (["-n", namespace] if namespace else [])
    args += ["--show-managed-fields"] if managed_fields else []
    proc = kube.kubectl(*args, check=False, timeout=60)
    if proc.returncode != 0:
        if any(s in proc.stderr for s in _NOT_FOUND):
            return None
        raise ClusterError(f"kubectl get {kind} {name} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def list_json(kube: Any, kind: str, namespace: str | None, labels: dict[str, str] | None = None) -> list[dict]:
    """Every object of ``kind`` in ``namespace`` (all namespaces when ``None``) matching ``labels``."""
    args = ["get", kind, "-o", "json"] + (["-n", namespace] if namespace else ["-A"])
    if labels:
        args += ["-l", selector_string(labels)]
    proc = kube.kubectl(*args, check=False, timeout=60)
    if proc.returncode != 0:
        raise ClusterError(f"kubectl get {kind} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout).get("items", [])


def pods_matching(kube: Any, namespace: str, labels: dict[str, str]) -> list[dict]:
    return list_json(kube, "pods", namespace, labels)


def running_pod(kube: Any, namespace: str, *, pod: str | None = None, labels: dict[str, str] | None = None) -> dict:
    """A Running pod by name or labels (the first by name, for stable choices)."""
    if pod:
        obj = get_json(kube, "pod", pod, namespace)
        if obj is None:
            raise ClusterError(f"pod {namespace}/{pod} does not exist")
        candidates = [obj]
    else:
        candidates = sorted(pods_matching(kube, namespace, labels or {}), key=lambda p: p["metadata"]["name"])
    running = [p for p in candidates if p.get("status", {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp")]
    if not running:
        what = pod or selector_string(labels or {}) or "any pod"
        raise ClusterError(f"no Running pod {what} in namespace {namespace}")
    return running[0]


def exec_in_pod(kube: Any, namespace: str, pod: str, script: str, *, container: str | None = None,
                timeout: float = 120) -> tuple[int, str, str]:
    """Run ``sh -c script`` in a pod's container: (exit code, stdout, stderr)."""
    args = ["exec", "-n", namespace, pod] + (["-c", container] if container else []) + ["--", "sh", "-c", script]
    proc = kube.kubectl(*args, check=False, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def workload_labels(kube: Any, namespace: str, workload: str) -> dict[str, str]:
    """The pod selector of a Deployment or StatefulSet named ``workload``."""
    for kind in ("deployment", "statefulset"):
        obj = get_json(kube, kind, workload, namespace)
        if obj is not None:
            return obj.get("spec", {}).get("selector", {}).get("matchLabels") or {}
    raise ClusterError(f"no Deployment or StatefulSet {namespace}/{workload}")
