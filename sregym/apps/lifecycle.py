"""Deploy, inspect, wait for and delete one app in a cluster."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
import time
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, Field

from sregym.apps import release
from sregym.apps.namespace import ensure_app_namespace
from sregym.apps.spec import AppSpec, load_app
from sregym.cluster.handle import ClusterHandle
from sregym.core.constants import LOADGEN_NAMESPACE
from sregym.core.errors import ClusterError, PrerequisiteError

# Waiting reasons that will not clear by themselves.
STUCK = {"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
         "CreateContainerError", "CrashLoopBackOff"}


class WorkloadStatus(BaseModel):
    kind: str
    name: str
    ready: int
    desired: int


class PodStatus(BaseModel):
    name: str
    phase: str
    ready: bool
    restarts: int
    reason: str | None = Field(None, description="why a container waits or last ended, if it does")


class AppStatus(BaseModel):
    """One app's release and workloads as the cluster reports them now."""

    name: str
    namespace: str
    release: str | None = Field(None, description="helm status: deployed, failed, ... (None: not installed)")
    chart_hash: str | None = None
    workloads: list[WorkloadStatus] = Field(default_factory=list)
    pods: list[PodStatus] = Field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        """What keeps the app from being ready, one line each."""
        out = [] if self.release == "deployed" else [f"release {self.name} is {self.release or 'not installed'}"]
        out += [f"{w.kind}/{w.name} {w.ready}/{w.desired} ready" for w in self.workloads if w.ready < w.desired]
        out += [f"pod/{p.name}: {p.reason}" for p in self.pods if p.reason and not p.ready]
        return out

    @property
    def ready(self) -> bool:
        return bool(self.workloads) and not self.problems


class DeployResult(BaseModel):
    name: str
    namespace: str
    chart_hash: str
    reused: bool
    seconds: float
    drift_reset: list[str] = []  # objects of a reused release that differed from the chart, put back


def _spec(app: AppSpec | str) -> AppSpec:
    return app if isinstance(app, AppSpec) else load_app(app)


def _pod_reason(pod: Any) -> str | None:
    for cs in (pod.status.init_container_statuses or []) + (pod.status.container_statuses or []):
        if cs.state and cs.state.waiting and cs.state.waiting.reason not in (None, "PodInitializing", "ContainerCreating"):
            return f"{cs.name} {cs.state.waiting.reason}: {(cs.state.waiting.message or '')[:200]}".rstrip(": ")
        if cs.last_state and cs.last_state.terminated and not cs.ready:
            t = cs.last_state.terminated
            return f"{cs.name} last exited {t.exit_code} ({t.reason})"
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == "False":
            return f"unschedulable: {cond.message}"
    return None


def status(cluster: ClusterHandle, app: AppSpec | str, namespace: str | None = None, *,
           installed: tuple[str | None, str | None] | None = None) -> AppStatus:
    """The release, workloads and pods of ``app`` in ``namespace`` (default: the app's own);
    ``installed``: the release's state and chart hash, when the caller has just read them."""
    spec = _spec(app)
    ns = namespace or spec.namespace
    state, digest = installed or release.installed(cluster, spec.name, ns)
    out = AppStatus(name=spec.name, namespace=ns, release=state, chart_hash=digest)
    if state is None:
        return out
    # one app per namespace: every workload there is the app's (this also covers charts without labels we know)
    kube = cluster.kube
    for kind, items in (("Deployment", kube.apps.list_namespaced_deployment(ns).items),
                        ("StatefulSet", kube.apps.list_namespaced_stateful_set(ns).items)):
        for w in items:
            desired = w.spec.replicas if w.spec.replicas is not None else 1
            ready = w.status.ready_replicas or 0
            if kind == "Deployment" and (w.status.updated_replicas or 0) < desired:
                ready = min(ready, w.status.updated_replicas or 0)  # an old ReplicaSet's pods do not count
            if kind == "Deployment" and not rollout_complete(w, desired):
                # old pods still serve a rollout just asked for (a fix, a restart): they read as
                # ready, but what runs is not yet what the spec says (kubectl rollout status's rule)
                ready = min(ready, max(0, desired - 1))
            out.workloads.append(WorkloadStatus(kind=kind, name=w.metadata.name, ready=ready, desired=desired))
    out.workloads += missing_components(spec, out.workloads)
    pods = kube.core.list_namespaced_pod(ns).items
    if spec.workload:  # the load generator runs apart (see loadgen_namespace), but it is the app's
        lg_ns, lg_name = loadgen_namespace(), loadgen_name(spec, ns)
        try:
            w = kube.apps.read_namespaced_deployment(lg_name, lg_ns)
            desired = w.spec.replicas if w.spec.replicas is not None else 1
            ready = min(w.status.ready_replicas or 0, w.status.updated_replicas or 0)
            pods += kube.core.list_namespaced_pod(lg_ns, label_selector=f"target-namespace={ns}").items
        except ApiException as e:
            if e.status != 404:
                raise
            desired, ready = 1, 0
        out.workloads.append(WorkloadStatus(kind="Deployment", name=f"{lg_ns}/{lg_name}", ready=ready, desired=desired))
    for pod in pods:
        if pod.metadata.deletion_timestamp:
            continue
        statuses = pod.status.container_statuses or []
        out.pods.append(PodStatus(name=pod.metadata.name, phase=pod.status.phase or "Unknown",
                                  ready=bool(statuses) and all(cs.ready for cs in statuses),
                                  restarts=sum(cs.restart_count for cs in statuses), reason=_pod_reason(pod)))
    return out


def missing_components(spec: AppSpec, workloads: list[WorkloadStatus]) -> list[WorkloadStatus]:
    """Components the descriptor names that no workload runs yet, each as 0 of 1 ready: a store an
    operator creates from its custom resource after the install (event-pipeline's queue) is not
    there at first, and the app cannot serve without it."""
    seen = {(w.kind, w.name) for w in workloads}
    return [WorkloadStatus(kind=c.kind, name=c.name, ready=0, desired=1) for c in [*spec.services, *spec.datastores]
            if c.kind in ("Deployment", "StatefulSet") and (c.kind, c.name) not in seen]


def rollout_complete(deployment: Any, desired: int) -> bool:
    """``kubectl rollout status``'s test: the controller saw the latest spec, every replica is
    updated and available, and no old replica is left."""
    st = deployment.status
    return ((st.observed_generation or 0) >= (deployment.metadata.generation or 0)
            and (st.updated_replicas or 0) >= desired and (st.replicas or 0) <= (st.updated_replicas or 0)
            and (st.available_replicas or 0) >= (st.updated_replicas or 0))


def loadgen_namespace() -> str:
    """Where our charts run an app's load generator: readable, not writable, by the agent."""
    return LOADGEN_NAMESPACE


def loadgen_name(spec: AppSpec, namespace: str) -> str:
    """The load generator's Deployment: one per app namespace (the charts' ``loadgenName``)."""
    return f"{spec.workload.service if spec.workload else 'loadgen'}-{namespace}"


def ensure_namespace(cluster: ClusterHandle, name: str) -> None:
    """Create namespace ``name`` when it is missing (the load generator's, before an install)."""
    try:
        cluster.kube.core.read_namespace(name)
    except ApiException as e:
        if e.status != 404:
            raise ClusterError(f"cannot read namespace {name}: {e.reason}") from None
        try:
            cluster.kube.core.create_namespace({"metadata": {"name": name}})
        except ApiException as e2:
            if e2.status != 409:
                raise ClusterError(f"cannot create namespace {name}: {e2.reason}") from None


def wait_ready(cluster: ClusterHandle, app: AppSpec | str, namespace: str | None = None, *,
               timeout: float = 600, poll: float = 3) -> AppStatus:
    """Wait until every workload of the app is ready; raise ClusterError naming what is not."""
    spec = _spec(app)
    deadline = time.monotonic() + timeout
    stuck_since: dict[str, float] = {}
    while True:
        try:
            current = status(cluster, spec, namespace)
        except (urllib3.exceptions.HTTPError, ApiException) as e:
            # the API server restarting for a moment is not the app's failure: ask again until the deadline
            if time.monotonic() > deadline:
                raise ClusterError(f"the Kubernetes API did not answer while waiting for {spec.name}: {e}") from None
            time.sleep(poll)
            continue
        if current.ready:
            return current
        now = time.monotonic()
        for pod in current.pods:
            if pod.reason and any(r in pod.reason for r in STUCK):
                stuck_since.setdefault(pod.name, now)
                # an image that is not on the node will not appear: say so at once
                if "ErrImageNeverPull" in pod.reason or now - stuck_since[pod.name] > 120:
                    raise ClusterError(f"app {spec.name} in {current.namespace} cannot become ready: pod/{pod.name} "
                                       f"{pod.reason}", hint=_hint(pod.reason, current.namespace))
        if now > deadline:
            raise ClusterError(f"app {spec.name} in {current.namespace} not ready after {timeout:.0f}s: "
                               + "; ".join(current.problems[:8]), hint=f"kubectl -n {current.namespace} get pods,events")
        time.sleep(poll)


def _hint(reason: str, namespace: str) -> str:
    if "Image" in reason:
        return "build and load the images first: `sregym images build`"
    return f"kubectl -n {namespace} describe pods; kubectl -n {namespace} logs <pod>"


def install_values(cluster: ClusterHandle, spec: AppSpec, values: dict[str, Any] | None) -> dict[str, Any]:
    """The values an install gets: image tags, storage and trace endpoint for this cluster, then the
    caller's overrides, then the chart hash of all that."""
    computed: dict[str, Any] = {"images": release.image_values(spec)}
    computed = release.deep_merge(computed, release.storage_values(cluster))
    endpoint = _traces_endpoint()
    if endpoint:
        computed["tracing"] = {"otlpTracesEndpoint": endpoint}
    merged = release.deep_merge(computed, values or {})
    merged.setdefault("sregym", {})["chartHash"] = release.chart_hash(spec.chart, merged)
    return merged


def _traces_endpoint() -> str | None:
    """The in-cluster OTLP/HTTP traces URL of the observability stack (None: keep the chart's)."""
    from sregym.apps import observability

    return observability.IN_CLUSTER_OTLP


# How long an undrifted release at the right chart hash that is not ready is given to become ready
# by itself before it is upgraded (its pods coming back after a run's recovery take seconds).
READY_GRACE_S = 30.0


def ready_within(cluster: ClusterHandle, spec: AppSpec, namespace: str, seconds: float) -> bool:
    """Whether the app becomes ready within ``seconds`` (polled each second); False, not an error,
    when it does not or cannot (a stuck pod): the caller then upgrades it."""
    try:
        wait_ready(cluster, spec, namespace, timeout=seconds, poll=1)
    except ClusterError:
        return False
    return True


def deploy(cluster: ClusterHandle, app: AppSpec | str, namespace: str | None = None,
           values: dict[str, Any] | None = None, *, wait: bool = True, timeout: float = 600) -> DeployResult:
    """Install ``app`` into ``namespace`` and wait until Ready, or reuse the release already there
    when it was installed at the same chart hash (chart files + values), its objects are as the chart
    made them (else the upgrade puts back what drifted) and it is ready (an undrifted release that is
    not is given ``READY_GRACE_S`` to come up, as after a run's recovery, before it is upgraded).
    The namespace enforces Pod Security ``baseline`` before any pod is admitted (see
    :mod:`sregym.apps.namespace`)."""
    spec = _spec(app)
    ns = namespace or spec.namespace
    started = time.monotonic()
    ensure_app_namespace(cluster, ns)
    merged = install_values(cluster, spec, values)
    digest = merged["sregym"]["chartHash"]
    state, installed_hash = release.installed(cluster, spec.name, ns)
    drift: list[str] = []
    if state == "deployed" and installed_hash == digest:
        # whether it is ready and whether it drifted, side by side (the diff is the slow one)
        with ThreadPoolExecutor(max_workers=2) as pool:
            ready = pool.submit(lambda: status(cluster, spec, ns, installed=(state, installed_hash)).ready)
            drifts = pool.submit(release.drifted, cluster, spec.name, ns)
            is_ready, drift = ready.result(), drifts.result()
        if not is_ready and not drift:
            # The release is its chart, only not ready yet: the last run's recovery (a workload
            # scaled back, a pod restarted) is still coming up. An upgrade would change nothing;
            # it would only make the release "redeployed", so the next baseline is measured over
            # the tail of the last run's outage. Wait a little for it instead.
            is_ready = ready_within(cluster, spec, ns, READY_GRACE_S)
        if is_ready and not drift:
            return DeployResult(name=spec.name, namespace=ns, chart_hash=digest, reused=True,
                                seconds=time.monotonic() - started)
    if spec.workload:
        ensure_namespace(cluster, loadgen_namespace())
    if state is not None:  # a probe or volume rewritten another way, which the merge cannot put back (and
        # which left the release "failed" if an upgrade already tried)
        release.replace_union_conflicts(cluster, spec.name, ns)
    release.upgrade_install(cluster, spec, ns, merged)  # helm's three-way merge also resets the drift
    if drift:  # but for what no manifest had (an added env entry): a merge keeps that
        release.remove_additions(cluster, spec.name, ns)
    if wait:
        wait_ready(cluster, spec, ns, timeout=timeout)
    return DeployResult(name=spec.name, namespace=ns, chart_hash=digest, reused=False, drift_reset=drift,
                        seconds=time.monotonic() - started)


CUSTOM_RESOURCE_DELETE_S = 90.0


def chart_custom_resources(spec: AppSpec) -> list[str]:
    """``<plural>.<group>`` of each CustomResourceDefinition the app's chart ships (``crds/``)."""
    found = []
    for path in sorted((Path(spec.chart) / "crds").glob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                body = doc.get("spec") or {}
                found.append(f"{body['names']['plural']}.{body['group']}")
    return found


def delete_custom_resources(cluster: ClusterHandle, spec: AppSpec, namespace: str, *, timeout: float) -> None:
    """Delete the app's custom resources and wait until they are gone, while their controller still
    runs: an operator's finalizer (kopf puts one on every object it runs a timer for) is removed
    only by the operator, so uninstalling both at once leaves the objects, and with them the
    namespace, terminating for ever."""
    for resource in chart_custom_resources(spec):
        proc = cluster.kube.kubectl("delete", resource, "--all", "-n", namespace, "--ignore-not-found", "--wait=true",
                                    f"--timeout={timeout:.0f}s", check=False, timeout=timeout + 30)
        if proc.returncode != 0 and "the server doesn't have a resource type" not in proc.stderr:
            raise ClusterError(f"cannot delete the {resource} objects of {namespace}: {proc.stderr.strip()[-300:]}",
                               hint=f"kubectl -n {namespace} get {resource} -o yaml (look at metadata.finalizers: "
                                    "its controller must be running to remove them)")


def delete(cluster: ClusterHandle, app: AppSpec | str, namespace: str | None = None, *,
           purge_data: bool = False, timeout: float = 180, wait: bool = True) -> bool:
    """Uninstall the app and remove its namespace (claims included). With ``purge_data``, also the
    hostPath data this host keeps for it, so the next deploy starts from empty stores. With
    ``wait=False`` (and no ``purge_data``) it returns once the deletions are asked for: the custom
    resources still go first and are waited for, but the namespace may still be terminating, and a
    deploy there is refused until ``wait_namespace_gone`` says it is gone.
    Returns False when nothing was installed."""
    spec = _spec(app)
    ns = namespace or spec.namespace
    delete_custom_resources(cluster, spec, ns, timeout=min(timeout, CUSTOM_RESOURCE_DELETE_S))
    existed = release.uninstall(cluster, spec.name, ns, wait=wait)
    if spec.workload:  # helm removes it with the release; a half-removed release may leave it behind
        cluster.kube.kubectl("delete", "deployment,service,networkpolicy", "-n", loadgen_namespace(), "-l", f"target-namespace={ns}",
                             "--ignore-not-found", "--wait=false", check=False, timeout=60)
    try:
        cluster.kube.core.delete_namespace(ns)
        existed = True
    except ApiException as e:
        if e.status != 404:
            raise ClusterError(f"cannot delete namespace {ns}: {e.reason}") from None
    if wait or purge_data:  # the data goes only once no pod of the namespace can write it
        wait_namespace_gone(cluster, ns, timeout)
    if purge_data and cluster.data_dir is not None:
        data = Path(cluster.data_dir) / "volumes" / ns
        if data.exists():
            try:
                shutil.rmtree(data)
            except PermissionError:
                raise PrerequisiteError(f"cannot remove {data}: not permitted", hint="run as root") from None
    return existed


def wait_namespace_gone(cluster: ClusterHandle, ns: str, timeout: float = 180) -> None:
    """Wait until namespace ``ns`` no longer exists (at once when it never did)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            cluster.kube.core.read_namespace(ns)
        except ApiException as e:
            if e.status == 404:
                return
            raise
        time.sleep(2)
    raise ClusterError(f"namespace {ns} still terminating after {timeout:.0f}s",
                       hint=f"kubectl get namespace {ns} -o yaml (look at its conditions)")
