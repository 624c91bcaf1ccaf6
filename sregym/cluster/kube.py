"""Admin Kubernetes clients for one kubeconfig (fault plane, conductor, oracles)."""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import shutil
import ssl
import subprocess
import time
import urllib.parse
from functools import cached_property
from pathlib import Path
from typing import Any

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

    # -- generic reads: one GET each, no kubectl process (a kubectl is ~0.3-1 s of start on 2 busy cores)
    def get_json(self, path: str) -> dict[str, Any] | None:
        """The API server's JSON at ``path`` (e.g. ``/api/v1/namespaces/x/services``); None on 404."""
        api = self.api_client
        method, url, headers, body, _ = api.param_serialize("GET", path, header_params={"Accept": "application/json"},
                                                            auth_settings=["BearerToken"])
        resp = api.call_api(method, url, header_params=headers, body=body, _request_timeout=60)
        resp.read()
        if resp.status == 404:
            return None
        if not 200 <= resp.status < 300:
            raise ClusterError(f"cannot read {path} from the Kubernetes API: {resp.status} {resp.reason}")
        return json.loads(resp.data)

    def answers_as(self, namespace: str, service_account: str, path: str, *, at_once: int = 1,
                   seconds: float = 0.0, until: int | None = None) -> list[int]:
        """The HTTP statuses of GETs of ``path`` made as ``service_account`` of ``namespace`` by
        ``at_once`` clients started together, each in its own process (threads of one interpreter
        were measured to send one after the other: 1650 requests from 8 of them never overlapped on
        the server). Impersonated: the API server authenticates, impersonates, then applies API
        Priority and Fairness, so flow control classifies them as the account's own requests and
        answers 429 where it refuses them (a refusal by RBAC comes after, as 403). Each client sends
        one request, or keeps sending for ``seconds`` on one connection, stopping early once any
        client got status ``until``."""
        cfg = self.api_client.configuration
        url = urllib.parse.urlsplit(cfg.host)
        tls = ssl.create_default_context(cafile=cfg.ssl_ca_cert) if cfg.verify_ssl else ssl._create_unverified_context()
        if cfg.cert_file:
            tls.load_cert_chain(cfg.cert_file, cfg.key_file)
        headers = {"Accept": "application/json",
                   "Impersonate-User": f"system:serviceaccount:{namespace}:{service_account}"}
        token = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
        if token:
            headers["Authorization"] = token if token.lower().startswith("bearer ") else f"Bearer {token}"
        mp = multiprocessing.get_context("fork")
        start, seen, results = mp.Barrier(at_once), mp.Event(), mp.Queue()

        def client() -> None:
            conn = http.client.HTTPSConnection(url.hostname, url.port or 443, context=tls, timeout=30)
            out: list[int] = []
            try:
                conn.connect()
                start.wait(timeout=30)
                deadline = time.monotonic() + seconds
                while True:
                    conn.request("GET", path, headers=headers)
                    resp = conn.getresponse()
                    resp.read()
                    out.append(resp.status)
                    if resp.status == until:
                        seen.set()
                    if seen.is_set() or time.monotonic() >= deadline:
                        break
            finally:
                results.put(out)
                conn.close()

        procs = [mp.Process(target=client, daemon=True) for _ in range(at_once)]
        for proc in procs:
            proc.start()
        statuses = [s for _ in procs for s in results.get(timeout=60 + seconds)]
        for proc in procs:
            proc.join(timeout=10)
        return statuses

    def served_kinds(self, api_version: str) -> dict[str, tuple[str, bool]]:
        """``kind -> (plural, namespaced)`` of what the API serves at ``api_version`` (``v1``,
        ``apps/v1``); empty when it serves no such version. Asked once per client."""
        cache = self.__dict__.setdefault("_served_kinds", {})
        if api_version not in cache:
            found = self.get_json(f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}") or {}
            cache[api_version] = {r["kind"]: (r["name"], bool(r.get("namespaced")))
                                  for r in found.get("resources", []) if "/" not in r["name"]}
        return cache[api_version]

    def preferred_version(self, group: str) -> str | None:
        """``group/version`` the API prefers for ``group`` (``v1`` for the core group); None when it
        serves no such group. Asked once per client."""
        if not group:
            return "v1"
        cache = self.__dict__.setdefault("_preferred", {})
        if not cache:
            for g in (self.get_json("/apis") or {}).get("groups", []):
                cache[g["name"]] = (g.get("preferredVersion") or {}).get("groupVersion")
        return cache.get(group)

    def list_json(self, api_version: str, plural: str, namespace: str | None,
                  label_selector: str | None = None) -> dict[str, Any] | None:
        """The list of ``plural`` at ``api_version`` in ``namespace`` (None: cluster-wide) as the API
        returns it (items without ``kind``: the list's ``kind`` is ``<Kind>List``), only the objects
        ``label_selector`` selects when given; None when not served."""
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
        return self.get_json(f"{path}?labelSelector={label_selector}" if label_selector else path)

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
