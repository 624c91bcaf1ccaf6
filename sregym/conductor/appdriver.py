"""What the conductor needs from the apps layer, and a generic Helm-chart driver.

``AppDriver`` is the contract: deploy (or reuse when healthy at the same chart hash), health, and
an SLO baseline. The apps layer (``sregym.apps``) provides the real one with workloads and SLOs
through ``sregym.apps.app_driver(charts_dirs) -> AppDriver``; until it does, and for charts that
have no workload (test charts), ``ChartDriver`` deploys any chart folder with Helm and measures
readiness only, and says so in the baseline.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sregym.cluster.handle import ClusterHandle
from sregym.cluster.kube import helm_path
from sregym.core.errors import ClusterError, UnknownNameError
from sregym.core.problem import AppRef

REPO_CHARTS_DIR = Path(__file__).resolve().parents[2] / "charts"


@dataclass
class DeployedApp:
    """An app running in the cluster, as the conductor and oracles see it."""

    name: str
    namespace: str
    chart_hash: str | None = None
    reused: bool = False
    prometheus_url: str | None = None
    traces_url: str | None = None
    logs_url: str | None = None
    info: Any = None  # the apps layer's own description, handed to mitigation oracles
    components: list[str] = field(default_factory=list)


class AppDriver(Protocol):
    """Deploys apps and measures them; one per run (or suite)."""

    def deploy(self, app: AppRef, cluster: ClusterHandle) -> DeployedApp:
        """Install the app (or reuse a healthy install at the same chart hash) and wait until Ready."""

    def health(self, deployed: DeployedApp, cluster: ClusterHandle) -> tuple[bool, str]:
        """Whether every workload is ready and no pod crash-loops; the detail says what is not."""

    def baseline(self, deployed: DeployedApp, cluster: ClusterHandle, window_s: float) -> dict[str, Any]:
        """SLO measurements over ``window_s`` seconds, before any fault."""


def chart_hash(chart: Path, values: dict[str, Any]) -> str:
    """sha256 over the chart's files and the value overrides: same hash, same install."""
    h = hashlib.sha256()
    for p in sorted(chart.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(chart)).encode())
            h.update(p.read_bytes())
    h.update(json.dumps(values, sort_keys=True).encode())
    return h.hexdigest()[:16]


def find_chart(name: str, dirs: Sequence[Path]) -> Path:
    for d in dirs:
        if (Path(d) / name / "Chart.yaml").is_file():
            return Path(d) / name
    known = sorted({p.parent.name for d in dirs for p in Path(d).glob("*/Chart.yaml")})
    raise UnknownNameError("app", name, known)


def workload_health(kube: Any, namespace: str) -> tuple[bool, str]:
    """Every Deployment/StatefulSet has all replicas ready, and no container is crash-looping."""
    problems = []
    for kind, items in (("deployment", kube.apps.list_namespaced_deployment(namespace).items),
                        ("statefulset", kube.apps.list_namespaced_stateful_set(namespace).items)):
        for w in items:
            want = w.spec.replicas if w.spec.replicas is not None else 1
            ready = w.status.ready_replicas or 0
            if ready < want:
                problems.append(f"{kind}/{w.metadata.name} {ready}/{want} ready")
    for pod in kube.core.list_namespaced_pod(namespace).items:
        for cs in pod.status.container_statuses or []:
            waiting = cs.state.waiting.reason if cs.state and cs.state.waiting else None
            if waiting in ("CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError"):
                problems.append(f"pod/{pod.metadata.name} {cs.name}: {waiting}")
    return (not problems, "; ".join(problems) or "all workloads ready")


class ChartDriver:
    """Any chart folder, installed with ``helm upgrade --install``; readiness is the only SLO."""

    def __init__(self, charts_dirs: Sequence[Path] = (), *, timeout_s: int = 600):
        self.dirs = [*charts_dirs, REPO_CHARTS_DIR]
        self.timeout_s = timeout_s

    def _helm(self, cluster: ClusterHandle, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [helm_path(), *args, "--kubeconfig", str(cluster.kubeconfig)]
        if cluster.context:
            cmd += ["--kube-context", cluster.context]
        return subprocess.run(cmd, capture_output=True, text=True, input=input, timeout=self.timeout_s + 60)

    def deploy(self, app: AppRef, cluster: ClusterHandle) -> DeployedApp:
        chart = find_chart(app.name, self.dirs)
        ns = app.namespace or app.name.replace("_", "-")
        digest = chart_hash(chart, app.values)
        status = self._helm(cluster, "status", app.name, "-n", ns, "-o", "json")
        if status.returncode == 0:
            info = json.loads(status.stdout).get("info", {})
            if info.get("description") == digest and info.get("status") == "deployed":
                ok, _ = workload_health(cluster.kube, ns)
                if ok:
                    return DeployedApp(app.name, ns, digest, reused=True)
        # Values go in on stdin as JSON (a YAML subset), so nested overrides need no --set escaping.
        proc = self._helm(cluster, "upgrade", "--install", app.name, str(chart), "-n", ns, "--create-namespace",
                          "--wait", "--timeout", f"{self.timeout_s}s", "--description", digest, "-f", "-",
                          input=json.dumps(app.values))
        if proc.returncode != 0:
            raise ClusterError(f"helm could not deploy app {app.name!r} into namespace {ns}: "
                               f"{proc.stderr.strip()[-800:]}", hint=f"kubectl -n {ns} get pods,events")
        return DeployedApp(app.name, ns, digest, reused=False)

    def health(self, deployed: DeployedApp, cluster: ClusterHandle) -> tuple[bool, str]:
        return workload_health(cluster.kube, deployed.namespace)

    def baseline(self, deployed: DeployedApp, cluster: ClusterHandle, window_s: float) -> dict[str, Any]:
        ok, detail = self.health(deployed, cluster)
        return {"healthy": ok, "detail": detail, "measured": "workload readiness only (this chart has no SLO workload)"}


def app_driver(charts_dirs: Sequence[Path] = ()) -> AppDriver:
    """The apps layer's driver when it provides one, else the generic chart driver."""
    try:
        from sregym.apps import app_driver as apps_driver  # type: ignore[attr-defined]
    except ImportError:
        return ChartDriver(charts_dirs)
    return apps_driver(charts_dirs)
