"""Admin Kubernetes clients for one kubeconfig (fault plane, conductor, oracles)."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cached_property
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from sregym.core.errors import ClusterError, PrerequisiteError


class Kube:
    """Typed API clients over one kubeconfig + context, created lazily."""

    def __init__(self, kubeconfig: Path | str | None = None, context: str | None = None):
        self.kubeconfig = Path(kubeconfig) if kubeconfig else None
        self.context = context

    @cached_property
    def api_client(self) -> client.ApiClient:
        try:
            cfg = client.Configuration()
            config.load_kube_config(config_file=str(self.kubeconfig) if self.kubeconfig else None,
                                    context=self.context, client_configuration=cfg)
        except (config.ConfigException, FileNotFoundError, TypeError) as e:
            where = self.kubeconfig or os.environ.get("KUBECONFIG", "~/.kube/config")
            raise ClusterError(f"cannot load kubeconfig {where}" + (f" context {self.context!r}" if self.context else "")
                               + f": {e}", hint="run `sregym cluster up` or pass --kubeconfig/--context") from None
        return client.ApiClient(cfg)

    @cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api_client)

    @cached_property
    def apps(self) -> client.AppsV1Api:
        return client.AppsV1Api(self.api_client)

    @cached_property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api_client)

    @cached_property
    def rbac(self) -> client.RbacAuthorizationV1Api:
        return client.RbacAuthorizationV1Api(self.api_client)

    @cached_property
    def networking(self) -> client.NetworkingV1Api:
        return client.NetworkingV1Api(self.api_client)

    @cached_property
    def storage(self) -> client.StorageV1Api:
        return client.StorageV1Api(self.api_client)

    @cached_property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api_client)

    @cached_property
    def authz(self) -> client.AuthorizationV1Api:
        return client.AuthorizationV1Api(self.api_client)

    def can(self, namespace: str, service_account: str, verb: str, resource: str, group: str = "",
            name: str | None = None) -> bool:
        """Whether the API server lets ``service_account`` (of ``namespace``) ``verb`` ``resource`` there:
        a SubjectAccessReview with the groups every service account token carries, so a grant through
        any Role, ClusterRole or group binding counts, as it does for the workload's own requests."""
        review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{namespace}:{service_account}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
            resource_attributes=client.V1ResourceAttributes(namespace=namespace, verb=verb, resource=resource,
                                                            group=group, name=name)))
        try:
            return bool(self.authz.create_subject_access_review(review).status.allowed)
        except ApiException as e:
            raise ClusterError(f"cannot ask the API server whether {service_account} may {verb} {resource}: "
                               f"{e.status} {e.reason}") from None

    def server_version(self) -> str:
        try:
            return client.VersionApi(self.api_client).get_code().git_version
        except Exception as e:  # noqa: BLE001 - any transport failure means unreachable
            raise ClusterError(f"the Kubernetes API is not reachable: {e}") from None

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120, input: str | None = None
                ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster (the binary built with the cluster, else PATH's)."""
        exe = kubectl_path()
        cmd = [exe]
        if self.kubeconfig:
            cmd += ["--kubeconfig", str(self.kubeconfig)]
        if self.context:
            cmd += ["--context", self.context]
        proc = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, input=input)
        if check and proc.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
        return proc


def kubectl_path() -> str:
    from sregym.cluster.binaries import KUBERNETES

    built = KUBERNETES.path("kubectl")
    if built.is_file():
        return str(built)
    found = shutil.which("kubectl")
    if not found:
        raise PrerequisiteError("kubectl not found", hint="run `sregym cluster up` (it builds kubectl) or install it")
    return found


def helm_path() -> str:
    from sregym.cluster.binaries import HELM

    built = HELM.path("helm")
    if built.is_file():
        return str(built)
    found = shutil.which("helm")
    if not found:
        raise PrerequisiteError("helm not found", hint="run `sregym cluster up` (it builds helm) or install helm 3")
    return found


def not_found(e: Exception) -> bool:
    return isinstance(e, ApiException) and e.status == 404
