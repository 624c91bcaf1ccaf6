"""The observability stack (charts/observability): deploy it, tell when it is ready, give its URLs.

What runs, in namespace ``observability``:
  prometheus   Debian's Prometheus + a discovery sidecar (pods by prometheus.io/* annotations,
               kubelet and cAdvisor through the API server's node proxy, the node exporter)
  trace-store  OTLP/HTTP in (``jaeger-collector:4318``), Jaeger's query API out (``jaeger-query:16686``)
  log-query    one per node over /var/log/pods, ``GET /query?namespace=&pod=&container=&since=&until=&text=``
Each is a NodePort Service, so the host (conductor, oracles, the agent's tool server) reaches it at
``http://<node address>:<nodePort>``; on the local cluster the node is this host and its address
is the cluster bridge's (e.g. 10.244.0.1). A conductor inside a pod of its own network (the nightly
suite runner, a suite cell's Job) uses the Services' cluster DNS names instead (:func:`endpoints`).
The chart's NetworkPolicies let no pod query them but the log query's peers, the agent's tool
server and a conductor's pod (its namespace and its pod both carry
:data:`sregym.cluster.in_cluster.CONDUCTOR_LABELS`); OTLP ingest stays open; the node always may.
Every conductor installs them, wherever it runs: the install values do not depend on who deploys,
so no conductor reinstalls the stack with another fence than the one it has.
A conductor on a host that is not the cluster's only node (a workstation driving kind or a lab
cluster) is neither: it opens ``kubectl port-forward`` to the Services on its own loopback for as
long as it runs (:func:`forwarded_urls`), and stops them by PID when it exits; each is recorded when
it starts (:mod:`sregym.cluster.owned_processes`), so ``sregym cleanup`` stops those of a killed
process. What was opened is said through the caller's ``progress`` callback (the CLI shows it).
Override any URL with SREGYM_PROMETHEUS_URL, SREGYM_TRACES_URL, SREGYM_LOGS_URL (then no forward
is opened for it).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from sregym.apps import release
from sregym.cluster import in_cluster
from sregym.cluster.agent_proxy import node_address_on_this_host
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.port_forward import PortForward
from sregym.core.constants import HIDDEN_NAMESPACE, OBSERVABILITY_NAMESPACE
from sregym.core.errors import ClusterError, UnknownNameError
from sregym.core.promql import OBSERVABILITY_CHART

RELEASE = "observability"
CHART = OBSERVABILITY_CHART
# values key of each image in the chart -> image name (folder under charts/observability/images/)
IMAGES = {"prometheus": "prometheus", "nodeExporter": "node-exporter", "traceStore": "trace-store",
          "logQuery": "log-query"}
IN_CLUSTER_OTLP = f"http://jaeger-collector.{OBSERVABILITY_NAMESPACE}.svc:4318/v1/traces"
_ENV = {"prometheus": "SREGYM_PROMETHEUS_URL", "traces": "SREGYM_TRACES_URL", "logs": "SREGYM_LOGS_URL"}
# plus where this host sends OTLP spans (tests and demos only; the apps use the in-cluster address)
_HOST_ENV = {**_ENV, "otlp": "SREGYM_OTLP_URL"}
# where each endpoint answers when it is up
_HEALTH = {"prometheus": "/-/ready", "traces": "/api/services", "logs": "/healthz"}
# the Service and port behind each endpoint, as a pod (or a port-forward) reaches it
SERVICES = {"prometheus": ("prometheus", 9090), "traces": ("jaeger-query", 16686), "logs": ("log-query", 8080),
            "otlp": ("jaeger-collector", 4318)}
IN_POD_ADMISSION_S = 60  # how long a conductor in a pod waits for the fence to admit it before reinstalling
Progress = Callable[[str], None]  # told, one line each, what a step did that a person should know


def _silent(message: str) -> None:
    pass


def _chart_values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def node_ports() -> dict[str, int]:
    """NodePorts of the host-facing endpoints, as the chart sets them."""
    values = _chart_values()
    return {"prometheus": int(values["prometheus"]["nodePort"]), "traces": int(values["traces"]["queryNodePort"]),
            "logs": int(values["logs"]["nodePort"]), "otlp": int(values["traces"]["otlpNodePort"])}


def conductor_is_the_node(cluster: ClusterHandle) -> bool:
    """True when this host is the cluster's only node (the local cluster, or it reached as ``existing``).

    Only then do the NodePorts answer this host through the fence: its connections reach each pod
    from the pod's own node, which NetworkPolicy engines always admit. With several nodes, NodePort
    traffic is masqueraded to the address of the node that took it, which the fence refuses as it
    refuses a pod's connection through another node; such a conductor reaches the stack through
    port-forwards of its own (:func:`reach`) or runs in the cluster (docs/lab.md)."""
    return len(cluster.kube.core.list_node().items) == 1 and node_address_on_this_host(cluster.kube) is not None


def install_values() -> dict[str, Any]:
    """Values of an install: each image at its input-hash tag, the hidden namespace excluded, the
    query services fenced, the chart hash. The same wherever the conductor runs (this host, a pod,
    one node or many): there is no switch that installs the stack without its fence."""
    from sregym.cluster.images import image_tag

    images: dict[str, Any] = {}
    for key, name in IMAGES.items():
        try:
            images[key] = {"name": name, "tag": image_tag(name)}
        except UnknownNameError:
            continue  # not in this checkout: keep the chart's default
    labels = dict(in_cluster.CONDUCTOR_LABELS)
    values = {"images": images, "excludedNamespaces": [HIDDEN_NAMESPACE],
              "networkPolicy": {"enabled": True, "conductor": {"namespaceLabels": labels, "podLabels": labels}}}
    values["sregym"] = {"chartHash": release.chart_hash(CHART, values)}
    return values


def node_address(cluster: ClusterHandle) -> str:
    """Where NodePorts answer from this host: loopback for kind (its config maps the ports), else a
    node's InternalIP. On the local cluster that is the address of its own bridge on this host:
    kube-proxy does not serve NodePorts on 127.0.0.1 there (route_localnet stays off)."""
    if cluster.provider == "kind":
        return "127.0.0.1"
    for node in cluster.kube.core.list_node().items:
        for address in node.status.addresses or []:
            if address.type == "InternalIP":
                return address.address
    raise ClusterError(f"no node of cluster {cluster.name} has an InternalIP",
                       hint="set SREGYM_PROMETHEUS_URL, SREGYM_TRACES_URL and SREGYM_LOGS_URL (e.g. to port-forwards)")


def service_urls() -> dict[str, str]:
    """Where a pod reaches each endpoint: the Services' cluster DNS names (the address the fence
    judges is the pod's own, on one node or many; a NodePort through another node is masqueraded)."""
    return {name: f"http://{service}.{OBSERVABILITY_NAMESPACE}.svc:{port}" for name, (service, port) in SERVICES.items()}


def reach(cluster: ClusterHandle) -> str:
    """How this process reaches the endpoints no SREGYM_*_URL names: ``services`` (a conductor in a
    pod off the node: cluster DNS), ``node`` (the cluster's only node, or a pod in its network: the
    NodePorts) or ``port-forwards`` (any other host: the fence admits neither its NodePort traffic,
    masqueraded to a node's address, nor the host itself, so it goes through the API server)."""
    if conductor_is_the_node(cluster):
        return "node"
    return "services" if in_cluster.pod_namespace() is not None else "port-forwards"


# -- this process's port-forwards, one per endpoint, opened on first use and stopped at exit
_forwards: dict[tuple[str, str | None, str], PortForward] = {}
_forwards_lock = threading.Lock()


def forwarded_urls(cluster: ClusterHandle, names: list[str], progress: Progress = _silent) -> dict[str, str]:
    """URLs on 127.0.0.1 of port-forwards to the stack's Services, opened on first use (and opened
    again when kubectl has exited, e.g. its pod was replaced: on the same port when it is free),
    stopped when this process exits (:func:`close_port_forwards`). Tells ``progress`` what it opened."""
    opened: list[PortForward] = []
    with _forwards_lock:
        if not _forwards:
            atexit.register(close_port_forwards)
        urls = {}
        for name in names:
            key = (str(cluster.kubeconfig), cluster.context, name)
            forward = _forwards.get(key)
            if forward is None:
                forward = _forwards[key] = PortForward(cluster, OBSERVABILITY_NAMESPACE, *SERVICES[name])
            if not forward.alive():
                forward.start()
                opened.append(forward)
            urls[name] = forward.url
    if opened:
        listed = ", ".join(f"svc/{f.service}:{f.service_port} at {f.url} (pid {f.pid})" for f in opened)
        progress(f"this host is not the cluster's node, so it reaches the observability stack through "
                 f"port-forwards of its own, stopped when it exits (or by `sregym cleanup`): {listed}")
    return urls


def is_port_forward(url: str | None) -> bool:
    """True when ``url`` is one of this process's port-forwards (an address only this host reaches)."""
    return url is not None and any(f.url == url.rstrip("/") for f in list(_forwards.values()) if f.port)


def _stop_forward(url: str) -> None:
    with _forwards_lock:
        for forward in _forwards.values():
            if forward.port and forward.url == url.rstrip("/"):
                forward.stop()


def close_port_forwards() -> None:
    """Stop every port-forward this process opened, by PID."""
    with _forwards_lock:
        forwards = list(_forwards.values())
        _forwards.clear()
    for forward in forwards:
        forward.stop()


def for_pods(cluster: ClusterHandle, url: str | None) -> str | None:
    """``url`` as a pod of the cluster reaches it: a port-forward of this process (on this host's
    loopback) becomes its Service's ClusterIP address, any other URL stays as it is. The sandboxed
    tool server is handed this, never a forward, which is this host's alone."""
    forward = next((f for f in list(_forwards.values()) if url and f.port and f.url == url.rstrip("/")), None)
    if forward is None:
        return url
    ip = cluster.kube.core.read_namespaced_service(forward.service, OBSERVABILITY_NAMESPACE).spec.cluster_ip
    return f"http://{ip}:{forward.service_port}"


def endpoints(cluster: ClusterHandle, progress: Progress = _silent) -> dict[str, str]:
    """URLs reachable from here: ``prometheus``, ``traces`` (Jaeger API), ``logs``; plus
    ``otlp_traces_url`` (in-cluster, for services) and ``otlp_host_url`` (from here). From the
    cluster's only node (this host, or a pod in its network) the NodePorts; from any other pod
    (:func:`sregym.cluster.in_cluster.pod_namespace`) the Services; from any other host this
    process's own port-forwards (:func:`reach`; ``progress`` is told when one opens)."""
    found = {name: os.environ.get(env) for name, env in _HOST_ENV.items()}
    missing = [name for name, url in found.items() if not url]
    how = reach(cluster) if missing else None
    if how is None:
        base = {}
    elif how == "services":
        base = service_urls()
    elif how == "port-forwards":
        base = forwarded_urls(cluster, missing, progress)
    else:  # this host, or a pod in its network (hostNetwork on the local cluster): the sandbox's rules want addresses
        host, ports = node_address(cluster), node_ports()
        base = {name: f"http://{host}:{port}" for name, port in ports.items()}
    urls = {name: (found[name] or base[name]).rstrip("/") for name in _ENV}
    urls["otlp_traces_url"] = IN_CLUSTER_OTLP
    urls["otlp_host_url"] = (found["otlp"] or base["otlp"]).rstrip("/") + "/v1/traces"
    return urls


def prometheus_url(cluster: ClusterHandle) -> str:
    return endpoints(cluster)["prometheus"]


def traces_url(cluster: ClusterHandle) -> str:
    """Base URL of the Jaeger query API (``<url>/api/traces``...)."""
    return endpoints(cluster)["traces"]


def logs_url(cluster: ClusterHandle) -> str:
    """Base URL of the log query (``<url>/query?...``)."""
    return endpoints(cluster)["logs"]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our own endpoint
            return response.status == 200
    except OSError:
        return False


def _workloads_ready(cluster: ClusterHandle) -> list[str]:
    """What is not ready yet, one line each (empty: every Deployment and DaemonSet is)."""
    kube, ns = cluster.kube, OBSERVABILITY_NAMESPACE
    problems = []
    try:
        deployments = kube.apps.list_namespaced_deployment(ns).items
        daemonsets = kube.apps.list_namespaced_daemon_set(ns).items
    except (ApiException, urllib3.exceptions.HTTPError) as e:
        # a restarting API server is one more reason to wait, not a traceback
        return [f"cannot list the workloads of namespace {ns}: {str(e).splitlines()[0][:200]}"]
    if not deployments and not daemonsets:
        return [f"nothing is deployed in namespace {ns}"]
    for d in deployments:
        if (d.status.available_replicas or 0) < (d.spec.replicas or 0) or d.status.observed_generation < d.metadata.generation:
            problems.append(f"deployment/{d.metadata.name} {d.status.available_replicas or 0}/{d.spec.replicas} available")
    for d in daemonsets:
        s = d.status
        if (s.number_ready or 0) < (s.desired_number_scheduled or 0) or (s.updated_number_scheduled or 0) < (s.desired_number_scheduled or 0):
            problems.append(f"daemonset/{d.metadata.name} {s.number_ready or 0}/{s.desired_number_scheduled} ready")
    return problems


def problems(cluster: ClusterHandle, progress: Progress = _silent) -> list[str]:
    """Why the stack is not ready (workloads not ready, an endpoint that does not answer)."""
    found = _workloads_ready(cluster)
    if found:
        return found
    try:
        urls = endpoints(cluster, progress)
    except ClusterError as e:  # a port-forward that did not start (its pod not running yet)
        return [e.message]
    silent = [name for name, path in _HEALTH.items() if not _answers(urls[name] + path)]
    for name in silent:  # a forward to a pod that is going away: the next check opens it anew
        _stop_forward(urls[name])
    return [f"{name} does not answer at {urls[name]}{_HEALTH[name]}" for name in silent]


def observability_ready(cluster: ClusterHandle, progress: Progress = _silent) -> bool:
    """True when every workload of the stack is ready and each endpoint answers from this host."""
    return not problems(cluster, progress)


def deploy_observability(cluster: ClusterHandle, *, wait: bool = True, timeout: float = 300,
                         progress: Progress = _silent) -> bool:
    """Install or upgrade the stack, or reuse it when it runs at the same chart hash and is ready.

    Returns True when it was (re)installed, False when reused. Images must be in the cluster
    (`sregym images build`). ``progress`` is told what a person should know (a port-forward opened).
    """
    namespace = in_cluster.pod_namespace()
    if namespace is not None:  # a conductor in a pod: the fence admits its namespace once labelled
        in_cluster.admit_own_namespace(cluster.kube, namespace)
    values = install_values()
    digest = values["sregym"]["chartHash"]
    state, installed_hash = release.installed(cluster, RELEASE, OBSERVABILITY_NAMESPACE)
    if state == "deployed" and installed_hash == digest:
        if observability_ready(cluster, progress):
            return False
        if namespace is not None:
            # a new pod's address (or its namespace's new label) reaches the policy engine within
            # seconds: wait for it rather than reinstall the shared stack under other cells' feet
            try:
                wait_ready(cluster, timeout=IN_POD_ADMISSION_S, progress=progress)
                return False
            except ClusterError:
                pass
    proc = release.helm(cluster, "upgrade", "--install", RELEASE, str(CHART), "-n", OBSERVABILITY_NAMESPACE,
                        "--create-namespace", "-f", "-", input=json.dumps(values))
    if proc.returncode != 0:
        raise ClusterError(f"helm could not install the observability stack: {proc.stderr.strip()[-800:]}",
                           hint=f"kubectl -n {OBSERVABILITY_NAMESPACE} get events")
    if wait:
        wait_ready(cluster, timeout=timeout, progress=progress)
    return True


def wait_ready(cluster: ClusterHandle, *, timeout: float = 300, progress: Progress = _silent) -> None:
    deadline = time.monotonic() + timeout
    left = ["not checked yet"]
    while time.monotonic() < deadline:
        left = problems(cluster, progress)
        if not left:
            return
        time.sleep(3)
    hint = f"kubectl -n {OBSERVABILITY_NAMESPACE} get pods; if an image is missing, run `sregym images build`"
    if _forwards:
        hint += ("; this host reaches the stack through its own port-forwards (it is not the cluster's only node): "
                 "check that `kubectl port-forward` works with this kubeconfig, or set SREGYM_PROMETHEUS_URL, "
                 "SREGYM_TRACES_URL and SREGYM_LOGS_URL")
    raise ClusterError(f"the observability stack is not ready after {timeout:.0f}s: {'; '.join(left)}", hint=hint)
