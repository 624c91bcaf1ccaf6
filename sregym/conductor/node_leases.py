"""Node leases: a run with a node-level fault holds a ``coordination.k8s.io`` Lease on its node.

The suite scheduler already keeps its own conflicting cells apart; leases keep *processes* apart:
two suites (a researcher's and the nightly CronJob) on one cluster, or a suite and a lone
``sregym run``. A lease lives in the hidden namespace, is named after the node only, and carries
the fault plane's owner label so ``sregym cleanup`` can find it. A holder renews it while its run
lasts; a holder that died stops renewing and its lease expires, so nothing stays locked forever.
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

from sregym.core.constants import HIDDEN_NAMESPACE, OWNER_LABEL, OWNER_VALUE
from sregym.core.errors import ClusterError

DEFAULT_DURATION_S = 120


def lease_name(node: str) -> str:
    """``node-<node>``, trimmed to a valid object name (node names are DNS subdomains already)."""
    return ("node-" + re.sub(r"[^a-z0-9.-]", "-", node.lower()))[:253].rstrip("-.")


def holder_identity(run: str) -> str:
    """Who holds a lease: this host and process, and the run (so a log line can be traced back)."""
    return f"{socket.gethostname()}/{os.getpid()}/{run}"


def _parse_time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def lease_is_free(spec: dict[str, Any] | None, holder: str, now: datetime) -> bool:
    """Whether ``holder`` may take a lease whose spec is ``spec`` (None: no lease) at ``now``:
    nobody holds it, ``holder`` already does, or the holder stopped renewing it in time."""
    if not spec or not spec.get("holderIdentity"):
        return True
    if spec["holderIdentity"] == holder:
        return True
    renewed = _parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds") or DEFAULT_DURATION_S
    return renewed is None or renewed + timedelta(seconds=duration) < now


def _api_errors(method):
    """An unreachable API server or an unexpected answer becomes one ClusterError naming the lease."""
    import functools

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return method(self, *args, **kwargs)
        except (ApiException, HTTPError, OSError) as e:
            what = f" for node {args[0]}" if args and isinstance(args[0], str) else ""
            reason = getattr(e, "reason", None) or e
            raise ClusterError(f"node lease{what} in namespace {self.namespace}: {method.__name__} failed: {reason}",
                               hint="is the cluster reachable (`kubectl get nodes`)? then rerun with --resume") from None

    return wrapper


def _micro(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeLeases:
    """Take, renew and give back node leases through the Kubernetes API (``kube``: a ``Kube``)."""

    def __init__(self, kube: Any, *, namespace: str = HIDDEN_NAMESPACE, duration_s: int = DEFAULT_DURATION_S):
        from kubernetes import client

        self.api = client.CoordinationV1Api(kube.api_client)
        self.kube = kube
        self.namespace = namespace
        self.duration_s = duration_s

    def ensure_namespace(self) -> None:
        """Leases live in the hidden namespace; make sure it exists before the first run does."""
        from sregym.conductor.episode import ensure_hidden_namespace

        if self.namespace == HIDDEN_NAMESPACE:
            ensure_hidden_namespace(self.kube)

    @_api_errors
    def nodes(self) -> list[str]:
        return sorted(n.metadata.name for n in self.kube.core.list_node().items)

    @_api_errors
    def holder_of(self, node: str) -> str | None:
        """Who holds ``node``'s lease now (None: free or expired)."""
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self.api.read_namespaced_lease(lease_name(node), self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        spec = self.api.api_client.sanitize_for_serialization(lease.spec) or {}
        return None if lease_is_free(spec, "", datetime.now(timezone.utc)) else spec.get("holderIdentity")

    @_api_errors
    def acquire(self, node: str, holder: str) -> bool:
        """Take ``node``'s lease for ``holder``; False when someone else holds it (or won a race)."""
        from kubernetes.client.exceptions import ApiException

        now = datetime.now(timezone.utc)
        name = lease_name(node)
        spec = {"holderIdentity": holder, "leaseDurationSeconds": self.duration_s,
                "acquireTime": _micro(now), "renewTime": _micro(now)}
        try:
            lease = self.api.read_namespaced_lease(name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "labels": {OWNER_LABEL: OWNER_VALUE}}, "spec": spec}
            try:
                self.api.create_namespaced_lease(self.namespace, body)
                return True
            except ApiException as e2:
                if e2.status == 409:  # another holder created it first
                    return False
                raise
        current = self.api.api_client.sanitize_for_serialization(lease.spec) or {}
        if not lease_is_free(current, holder, now):
            return False
        if current.get("holderIdentity") == holder:  # a renewal keeps its acquire time
            spec["acquireTime"] = current.get("acquireTime") or spec["acquireTime"]
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "resourceVersion": lease.metadata.resource_version,
                             "labels": {**(lease.metadata.labels or {}), OWNER_LABEL: OWNER_VALUE}},
                "spec": {**spec, "leaseTransitions": (current.get("leaseTransitions") or 0)
                         + (current.get("holderIdentity") != holder)}}
        try:
            self.api.replace_namespaced_lease(name, self.namespace, body)  # resourceVersion: no lost race
            return True
        except ApiException as e:
            if e.status == 409:
                return False
            raise

    @_api_errors
    def release(self, node: str, holder: str) -> None:
        """Give ``node``'s lease back if ``holder`` still holds it (idempotent)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self.api.read_namespaced_lease(lease_name(node), self.namespace)
            if lease.spec and lease.spec.holder_identity == holder:
                self.api.delete_namespaced_lease(
                    lease_name(node), self.namespace,
                    body=client.V1DeleteOptions(preconditions=client.V1Preconditions(
                        resource_version=lease.metadata.resource_version)))
        except ApiException as e:
            if e.status not in (404, 409):
                raise

    def acquire_all(self, nodes: Sequence[str], holder: str) -> HeldLeases | None:
        """All of ``nodes`` (in name order, so two holders never deadlock) or none of them."""
        taken: list[str] = []
        for node in sorted(set(nodes)):
            if not self.acquire(node, holder):
                for n in taken:
                    self.release(n, holder)
                return None
            taken.append(node)
        return HeldLeases(self, taken, holder)


class HeldLeases:
    """Leases held for one run: renewed in the background until ``release``."""

    def __init__(self, leases: NodeLeases, nodes: list[str], holder: str):
        self.leases, self.nodes, self.holder = leases, nodes, holder
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="node-lease-renew", daemon=True)
        if nodes:
            self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.leases.duration_s / 3):
            for node in self.nodes:
                try:
                    self.leases.acquire(node, self.holder)
                except Exception:  # noqa: BLE001 - a missed renewal is retried; expiry is the fallback
                    pass

    def release(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        for node in self.nodes:
            try:
                self.leases.release(node, self.holder)
            except ClusterError:  # unreachable now: the lease expires by itself when no one renews it
                pass
