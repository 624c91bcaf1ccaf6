"""How a cluster is obtained: ``local`` (host processes, no Docker), ``kind`` (Docker), ``existing``
(any kubeconfig context). ``sregym cluster up`` records the chosen cluster in
``<state>/current.json`` so later commands (`run`, `validate`, `app deploy`) find it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from sregym.cluster.handle import ClusterHandle
from sregym.cluster.kube import Kube
from sregym.cluster.local.paths import LocalPaths, state_root
from sregym.core.errors import ClusterError, PrerequisiteError, UserInputError

PROVIDERS = ("local", "kind", "existing")
REPO_ROOT = Path(__file__).resolve().parents[2]

# What sregym does on a cluster, as (verb, group, resource, namespace-scoped) for access review.
REQUIRED_ACCESS = [
    ("create", "", "namespaces", False), ("get", "", "nodes", False), ("list", "", "pods", True),
    ("create", "", "pods", True), ("create", "", "pods/exec", True), ("patch", "apps", "deployments", True),
    ("create", "", "serviceaccounts", True), ("create", "", "serviceaccounts/token", True),
    ("create", "rbac.authorization.k8s.io", "roles", True), ("create", "rbac.authorization.k8s.io", "clusterroles", False),
    ("create", "networking.k8s.io", "networkpolicies", True), ("create", "", "resourcequotas", True),
    ("create", "coordination.k8s.io", "leases", True), ("patch", "", "nodes", False),
    ("create", "apps", "daemonsets", True),
]


class KindCluster:
    """A kind cluster from ``kind-config.yaml`` (one control plane, three workers). Needs Docker."""

    provider = "kind"

    def __init__(self, name: str = "sregym", config: Path | None = None):
        self.name = name
        self.config = config or REPO_ROOT / "kind-config.yaml"
        self.kubeconfig = state_root() / "kind" / f"{name}.kubeconfig"

    def _require(self) -> str:
        kind = shutil.which("kind")
        if not kind or not shutil.which("docker"):
            raise PrerequisiteError("the kind provider needs the `kind` and `docker` commands and a running Docker "
                                    "engine", hint="install Docker and kind, or use --provider local (no Docker)")
        if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
            raise PrerequisiteError("Docker is installed but its engine is not running (`docker info` fails)",
                                    hint="start dockerd, or use --provider local")
        return kind

    def up_command(self) -> list[str]:
        return ["kind", "create", "cluster", "--name", self.name, "--config", str(self.config),
                "--kubeconfig", str(self.kubeconfig), "--wait", "300s"]

    def up(self, progress=lambda s: None, **kw) -> ClusterHandle:
        kind = self._require()
        self.kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        existing = subprocess.run([kind, "get", "clusters"], capture_output=True, text=True).stdout.split()
        if self.name not in existing:
            progress(f"kind create cluster --name {self.name}")
            proc = subprocess.run([kind, *self.up_command()[1:]], capture_output=True, text=True)
            if proc.returncode != 0:
                raise ClusterError(f"kind create cluster failed: {proc.stderr.strip()[-2000:]}")
        else:
            subprocess.run([kind, "export", "kubeconfig", "--name", self.name, "--kubeconfig", str(self.kubeconfig)],
                           check=True, capture_output=True)
        return self.handle()

    def down(self, progress=lambda s: None, **kw) -> list[str]:
        kind = self._require()
        subprocess.run([kind, "delete", "cluster", "--name", self.name], check=False, capture_output=True)
        return [f"kind cluster {self.name}"]

    def status(self) -> dict[str, str]:
        return _api_status(self.handle().kube)

    def handle(self) -> ClusterHandle:
        return ClusterHandle(self.name, "kind", self.kubeconfig, context=f"kind-{self.name}")

    def load_image_command(self, archive: Path) -> list[str]:
        return ["kind", "load", "image-archive", str(archive), "--name", self.name]


class ExistingCluster:
    """Any cluster reachable through a kubeconfig context. sregym never starts or stops it."""

    provider = "existing"

    def __init__(self, kubeconfig: Path | None = None, context: str | None = None):
        self.kubeconfig = Path(kubeconfig).expanduser() if kubeconfig else _default_kubeconfig()
        self.context = context
        self.name = context or "existing"

    def handle(self) -> ClusterHandle:
        return ClusterHandle(self.name, "existing", self.kubeconfig, context=self.context)

    def up(self, progress=lambda s: None, **kw) -> ClusterHandle:
        kube = self.handle().kube
        progress("checking the API is reachable")
        version = kube.server_version()
        progress(f"API reachable (Kubernetes {version}); checking access rights")
        missing = missing_access(kube)
        if missing:
            raise ClusterError("this kubeconfig lacks rights sregym needs: " + "; ".join(missing),
                               hint="bind the identity to cluster-admin on a lab cluster, or grant the listed verbs")
        return self.handle()

    def down(self, progress=lambda s: None, **kw) -> list[str]:
        raise UserInputError("sregym does not stop an existing cluster it did not start",
                             hint="`sregym cleanup` removes what sregym put on it")

    def status(self) -> dict[str, str]:
        return _api_status(self.handle().kube)


def missing_access(kube: Kube) -> list[str]:
    """Each required (verb, resource) the identity cannot do, via SelfSubjectAccessReview."""
    from kubernetes import client

    missing = []
    for verb, group, resource, namespaced in REQUIRED_ACCESS:
        sub = resource.split("/", 1)
        attrs = client.V1ResourceAttributes(verb=verb, group=group, resource=sub[0],
                                            subresource=sub[1] if len(sub) > 1 else None,
                                            namespace="default" if namespaced else None)
        review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs))
        result = kube.authz.create_self_subject_access_review(review)
        if not result.status.allowed:
            missing.append(f"{verb} {group + '/' if group else ''}{resource}")
    return missing


def _api_status(kube: Kube) -> dict[str, str]:
    out = {"api": kube.server_version()}
    for node in kube.core.list_node().items:
        ready = next((c.status for c in node.status.conditions or [] if c.type == "Ready"), "Unknown")
        out[f"node {node.metadata.name}"] = "Ready" if ready == "True" else "NotReady"
    return out


def _default_kubeconfig() -> Path:
    import os

    return Path(os.environ.get("KUBECONFIG", "").split(":")[0] or Path.home() / ".kube" / "config")


def get_provider(provider: str | None = None, *, name: str = "default", kubeconfig: Path | None = None,
                 context: str | None = None):
    """The provider for CLI flags: ``local`` by default, ``existing`` when a context is given."""
    if provider is None:
        provider = "existing" if (context or kubeconfig) else "local"
    if provider == "local":
        from sregym.cluster.local.provider import LocalCluster

        return LocalCluster(name)
    if provider == "kind":
        return KindCluster(name if name != "default" else "sregym")
    if provider == "existing":
        return ExistingCluster(kubeconfig, context)
    raise UserInputError(f"unknown provider {provider!r}", hint=f"use one of: {', '.join(PROVIDERS)}")


def _current_file() -> Path:
    return state_root() / "current.json"


def remember(handle: ClusterHandle) -> None:
    _current_file().parent.mkdir(parents=True, exist_ok=True)
    _current_file().write_text(json.dumps({"name": handle.name, "provider": handle.provider,
                                           "kubeconfig": str(handle.kubeconfig), "context": handle.context}))


def forget(handle: ClusterHandle) -> None:
    try:
        cur = json.loads(_current_file().read_text())
    except (OSError, ValueError):
        return
    if cur.get("name") == handle.name and cur.get("provider") == handle.provider:
        _current_file().unlink(missing_ok=True)


def current_cluster(kubeconfig: Path | None = None, context: str | None = None) -> ClusterHandle:
    """The cluster later commands act on: explicit flags, else the last `cluster up`, else local,
    else (inside a pod) the cluster of the pod's ServiceAccount."""
    if kubeconfig or context:
        return ExistingCluster(kubeconfig, context).handle()
    try:
        cur = json.loads(_current_file().read_text())
        return ClusterHandle(cur["name"], cur["provider"], Path(cur["kubeconfig"]), cur.get("context"),
                             LocalPaths(cur["name"]).root if cur["provider"] == "local" else None)
    except (OSError, ValueError, KeyError):
        pass
    paths = LocalPaths("default")
    if paths.admin_kubeconfig.exists():
        return ClusterHandle("default", "local", paths.admin_kubeconfig, None, paths.root)
    from sregym.cluster import in_cluster

    if in_cluster.pod_namespace() is not None:  # a suite runner or cell in a pod: its ServiceAccount
        return ExistingCluster(in_cluster.write_kubeconfig()).handle()
    raise ClusterError("no cluster: none was brought up and no kubeconfig/context was given",
                       hint="run `sregym cluster up` (local) or pass --kubeconfig/--context")
