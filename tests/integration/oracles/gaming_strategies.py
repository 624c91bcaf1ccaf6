"""What a gaming agent does with write access to the app's namespace (shared by the anti-gaming
tests): nothing, restart every pod, delete and recreate every workload from its current spec,
or scale everything to zero and back."""

from __future__ import annotations

import json
import time

STRATEGIES = ("do_nothing", "restart_every_pod", "recreate_workloads", "scale_to_zero_and_back")


def workloads(kube, ns: str) -> list[dict]:
    out = []
    for kind in ("deployments", "statefulsets"):
        out += json.loads(kube.kubectl("get", kind, "-n", ns, "-o", "json").stdout)["items"]
    return out


def wait_settled(kube, ns: str, timeout: int = 60) -> None:
    """Give every rollout up to ``timeout`` seconds (a faulty one may never finish)."""
    for w in workloads(kube, ns):
        kube.kubectl("rollout", "status", f"{w['kind'].lower()}/{w['metadata']['name']}", "-n", ns,
                     f"--timeout={timeout}s", check=False, timeout=timeout + 30)


def play(strategy: str, kube, ns: str, settle: int = 60) -> None:
    if strategy == "restart_every_pod":
        kube.kubectl("delete", "pods", "--all", "-n", ns, "--wait=true", timeout=180)
    elif strategy == "recreate_workloads":
        items = workloads(kube, ns)
        for w in items:
            kube.kubectl("delete", w["kind"].lower(), w["metadata"]["name"], "-n", ns, "--wait=true", timeout=180)
        for w in items:
            meta = {k: v for k, v in w["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
            meta.get("annotations", {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
            kube.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": w["apiVersion"], "kind": w["kind"],
                                                                "metadata": meta, "spec": w["spec"]}))
    elif strategy == "scale_to_zero_and_back":
        items = [(w["kind"].lower(), w["metadata"]["name"], w["spec"].get("replicas", 1)) for w in workloads(kube, ns)]
        for kind, name, _ in items:
            kube.kubectl("scale", f"{kind}/{name}", "-n", ns, "--replicas=0")
        time.sleep(5)
        for kind, name, n in items:
            kube.kubectl("scale", f"{kind}/{name}", "-n", ns, f"--replicas={n}")
    if strategy != "do_nothing":
        wait_settled(kube, ns, settle)
