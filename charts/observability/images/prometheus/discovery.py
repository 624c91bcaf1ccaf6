"""Kubernetes service discovery for Debian's Prometheus, through file_sd.

Debian builds Prometheus without ``kubernetes_sd_configs`` (its client-go dependencies are not
packaged), so this sidecar lists pods and nodes from the API server with the pod's ServiceAccount
and writes Prometheus ``file_sd`` target files carrying the same ``__meta_kubernetes_*`` labels
that ``kubernetes_sd_configs`` would. The scrape jobs keep the usual relabeling rules
(``prometheus.io/scrape``, ``prometheus.io/port``, ``prometheus.io/path``); Prometheus picks up
file changes at once (inotify).

  pods.json   one target per pod with an IP (address = pod IP, port from the first declared port)
  nodes.json  one target per node
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import time
import urllib.request
from pathlib import Path

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def sanitize(name: str) -> str:
    """Label names the way Prometheus's Kubernetes discovery makes them (``app.kubernetes.io/name`` -> ``app_kubernetes_io_name``)."""
    return _UNSAFE.sub("_", name)


def pod_targets(pods: dict) -> list[dict]:
    """file_sd groups for a PodList (one per pod that has an IP)."""
    groups = []
    for pod in pods.get("items", []):
        meta, spec, status = pod.get("metadata", {}), pod.get("spec", {}), pod.get("status", {})
        ip = status.get("podIP")
        if not ip:
            continue
        ports = [p for c in spec.get("containers", []) for p in c.get("ports", []) or []]
        address = f"{ip}:{ports[0]['containerPort']}" if ports else ip
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions", []) or [])
        labels = {
            "__meta_kubernetes_namespace": meta.get("namespace", ""),
            "__meta_kubernetes_pod_name": meta.get("name", ""),
            "__meta_kubernetes_pod_ip": ip,
            "__meta_kubernetes_pod_node_name": spec.get("nodeName", ""),
            "__meta_kubernetes_pod_host_ip": status.get("hostIP", ""),
            "__meta_kubernetes_pod_phase": status.get("phase", ""),
            "__meta_kubernetes_pod_ready": "true" if ready else "false",
            "__meta_kubernetes_pod_uid": meta.get("uid", ""),
        }
        if ports:
            labels["__meta_kubernetes_pod_container_port_number"] = str(ports[0]["containerPort"])
        for key, value in (meta.get("labels") or {}).items():
            labels[f"__meta_kubernetes_pod_label_{sanitize(key)}"] = value
        for key, value in (meta.get("annotations") or {}).items():
            labels[f"__meta_kubernetes_pod_annotation_{sanitize(key)}"] = value
        groups.append({"targets": [address], "labels": labels})
    return sorted(groups, key=lambda g: (g["labels"]["__meta_kubernetes_namespace"],
                                         g["labels"]["__meta_kubernetes_pod_name"]))


def node_targets(nodes: dict) -> list[dict]:
    """file_sd groups for a NodeList (address: the node's InternalIP; jobs usually rewrite it)."""
    groups = []
    for node in nodes.get("items", []):
        name = node.get("metadata", {}).get("name", "")
        addresses = {a.get("type"): a.get("address") for a in node.get("status", {}).get("addresses", []) or []}
        labels = {"__meta_kubernetes_node_name": name}
        for key, value in (node.get("metadata", {}).get("labels") or {}).items():
            labels[f"__meta_kubernetes_node_label_{sanitize(key)}"] = value
        groups.append({"targets": [addresses.get("InternalIP") or name], "labels": labels})
    return sorted(groups, key=lambda g: g["labels"]["__meta_kubernetes_node_name"])


def write_atomically(path: Path, groups: list[dict]) -> None:
    text = json.dumps(groups, indent=1, sort_keys=True)
    if path.exists() and path.read_text() == text:
        return  # unchanged: do not make Prometheus reload
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


class ApiServer:
    def __init__(self) -> None:
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.base = f"https://{host}:{port}"
        self.context = ssl.create_default_context(cafile=str(SA_DIR / "ca.crt"))

    def get(self, path: str) -> dict:
        token = (SA_DIR / "token").read_text().strip()  # re-read: projected tokens rotate
        request = urllib.request.Request(self.base + path, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, context=self.context, timeout=20) as response:  # noqa: S310
            return json.load(response)


def main() -> None:
    out = Path(os.environ.get("TARGETS_DIR", "/etc/prometheus/targets"))
    interval = float(os.environ.get("REFRESH_SECONDS", "10"))
    out.mkdir(parents=True, exist_ok=True)
    api = ApiServer()
    while True:
        try:
            write_atomically(out / "pods.json", pod_targets(api.get("/api/v1/pods")))
            write_atomically(out / "nodes.json", node_targets(api.get("/api/v1/nodes")))
        except Exception as e:  # noqa: BLE001 - keep the last targets and retry
            print(json.dumps({"msg": "discovery failed", "error": str(e)}), file=sys.stderr, flush=True)
        time.sleep(interval)


if __name__ == "__main__":
    main()
