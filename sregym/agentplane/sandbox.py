"""The agent's sandbox: a namespace of its own where the MCP tool server and external agents run as pods.

The conductor's host (problems, journal, state, admin kubeconfig, run records, the repository,
its processes) is out of the agent's reach by construction: the agent's code runs in a container
from the workbench image (``images/workbench``), which holds only the tool server's modules and
kubectl. Every pod here is hardened the same way (non-root, read-only root file system, no
capabilities, no host namespaces or paths, no ServiceAccount token, seccomp RuntimeDefault, CPU and
memory limits, a deadline), the namespace enforces Pod Security ``restricted``, and NetworkPolicies
(enforced by kube-router on the local cluster) deny everything but:

- the tool server (``sre-tools``): egress to the agent's API endpoint (taken from the kubeconfig it
  is given), the observability query endpoints and the conductor's callback; ingress on its port
  from the node (the conductor) and this namespace only. The observability chart's own policies let
  exactly this pod in (by :data:`NAMESPACE_LABELS` and its component label): the trace store and the
  log query it queries directly, Prometheus only through the conductor's view on the host;
- an agent pod (``sre-agent``): egress to the API endpoint, the tool server, and the model
  endpoints the user names (``--agent-egress CIDR:PORT``). Not to Prometheus or the log store:
  those are the grader's; the agent queries them through the tools.

Secrets (the kubeconfig, tokens, the prompt, the agent's own API keys) reach pods as a Secret volume
or ``secretKeyRef`` environment, never on a command line. The namespace name is neutral and per run;
the conductor journals it before it exists so ``sregym cleanup`` deletes it after a crash.
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes.client.exceptions import ApiException

from sregym.cluster.agent_proxy import node_address_on_this_host
from sregym.core.errors import ClusterError, PrerequisiteError, UserInputError

NAMESPACE_PREFIX = "sre-workbench"
# On every sandbox namespace: the observability chart lets this namespace's tool server pod (and no
# other pod) query the trace store and the log query (charts/observability, networkPolicy.toolServer).
NAMESPACE_LABELS = {"app.kubernetes.io/part-of": NAMESPACE_PREFIX}
IMAGE_NAME = "workbench"
SERVER_PORT = 8080
SERVER_POD = "sre-tools"
AGENT_POD = "sre-agent"
COMPONENT_LABEL = "app.kubernetes.io/component"
SECRET_DIR = "/var/run/sre"
HOME_DIR = "/home/agent"
USER_ID = 10001  # the workbench image's user; numeric so runAsNonRoot is checkable
KUBECONFIG_KEY = "kubeconfig"
PROMPT_KEY = "task.md"
STARTUP_TIMEOUT = 90.0
# Run first in every sandbox pod (an init container, same network identity): wait until every canary
# (an address that answers an unfenced pod) stops answering, so the agent never starts before the
# NetworkPolicy engine has put the pod's rules in place (kube-router does so a few seconds after the
# pod appears); fail the pod if that does not happen in time.
FENCE_CHECK = r"""
import socket, sys, time
deadline, targets = time.monotonic() + float(sys.argv[1]), sys.argv[2:]
while True:
    reachable = []
    for target in targets:
        host, port = target.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            reachable.append(target)
        except OSError:
            pass
    if not reachable:
        sys.exit(0)
    if time.monotonic() > deadline:
        print("the sandbox's network fence is not in place: still reachable " + " ".join(reachable), file=sys.stderr)
        sys.exit(1)
    time.sleep(0.5)
"""
FENCE_TIMEOUT = 60.0
_FAILED_WAITING = {"ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                   "CreateContainerConfigError", "CreateContainerError", "RunContainerError", "CrashLoopBackOff"}


def new_namespace_name() -> str:
    """A per-run name that says nothing about the problem (the agent can list namespaces)."""
    return f"{NAMESPACE_PREFIX}-{secrets.token_hex(3)}"


def workbench_image() -> str:
    """The reference of the workbench image at this checkout (``sregym images build`` makes it)."""
    from sregym.cluster.images import image_ref

    return image_ref(IMAGE_NAME)


@dataclass(frozen=True)
class Endpoint:
    """One TCP destination a sandbox pod may reach."""

    host: str
    port: int

    @property
    def cidr(self) -> str:
        return f"{self.host}/32"


def url_endpoint(url: str) -> Endpoint:
    """host:port of an http(s) URL (the scheme's default port when none is given)."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise UserInputError(f"{url!r} is not a URL with a host")
    return Endpoint(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))


def parse_egress(spec: str) -> tuple[str, int]:
    """``CIDR:PORT`` (or ``IP:PORT``) of ``--agent-egress`` -> (cidr, port), with a clear error."""
    cidr, _, port = spec.rpartition(":")
    try:
        network = ipaddress.ip_network(cidr, strict=False)
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError(port)
    except ValueError:
        raise UserInputError(f"--agent-egress {spec!r} is not CIDR:PORT",
                             hint="e.g. --agent-egress 10.244.0.1:8000 (a model server on the node)") from None
    return str(network), number


# -- addresses -------------------------------------------------------------------------------------
def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def api_server_endpoint(kube: Any) -> Endpoint:
    """Where pods reach the API server: the address it advertises (the ``kubernetes`` Endpoints)."""
    try:
        ep = kube.core.read_namespaced_endpoints("kubernetes", "default")
    except ApiException as e:
        raise ClusterError(f"cannot read the API server's advertised address (endpoints default/kubernetes): "
                           f"{e.reason}") from None
    for subset in ep.subsets or []:
        for address in subset.addresses or []:
            for port in subset.ports or []:
                return Endpoint(address.ip, port.port)
    raise ClusterError("the API server advertises no address (endpoints default/kubernetes is empty)")


def pod_reachable_kubeconfig(text: str, kube: Any) -> tuple[str, Endpoint]:
    """The kubeconfig as a pod must see it, and the API endpoint it names.

    A server on loopback (the local cluster's admin view, 127.0.0.1:6443) is rewritten to the
    address the API server advertises to pods; any other server (e.g. an API proxy on the node's
    bridge address) is kept as given, so the sandbox reaches exactly the endpoint it was handed."""
    doc = yaml.safe_load(text)
    try:
        current = doc.get("current-context")
        context = next(c["context"] for c in doc["contexts"] if c["name"] == current) if current \
            else doc["contexts"][0]["context"]
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == context["cluster"])
        server = cluster["server"]
    except (KeyError, IndexError, StopIteration, TypeError, AttributeError):
        raise UserInputError("the agent's kubeconfig names no server for its current context",
                             hint="it is written by create_agent_access; regenerate it") from None
    endpoint = url_endpoint(server)
    if _is_loopback(endpoint.host):
        endpoint = api_server_endpoint(kube)
        cluster["server"] = f"https://{endpoint.host}:{endpoint.port}"
    return yaml.safe_dump(doc, sort_keys=False), endpoint


def local_address_for_pods(kube: Any) -> str:
    """An address of this host that the cluster's pods reach: a node's InternalIP that is one of
    ours (on the local cluster, the pod bridge's gateway). The conductor's receiver listens there."""
    try:
        kube.core.list_node()
    except ApiException as e:
        raise ClusterError(f"cannot list nodes: {e.reason}") from None
    address = node_address_on_this_host(kube)
    if address is None:
        raise PrerequisiteError("no node of this cluster has an address on this host, so sandbox pods cannot "
                                "reach the conductor", hint="the sandbox needs the local cluster (or a node on this "
                                "host); or run the agent on the host with --agent-host --run-as USER")
    return address


def service_peers(kube: Any, endpoint: Endpoint, node_ips: set[str]) -> list[dict[str, Any]]:
    """NetworkPolicy egress rules that let a pod reach ``endpoint``.

    Policies are matched after kube-proxy's DNAT, so a Service's ClusterIP or NodePort must be
    allowed as the pods behind it (by namespace and selector, on the target port); the address
    itself is allowed too (a host process, or a policy engine that matches before DNAT)."""
    rules = [{"to": [{"ipBlock": {"cidr": endpoint.cidr}}], "ports": [{"protocol": "TCP", "port": endpoint.port}]}]
    try:
        services = kube.core.list_service_for_all_namespaces().items
    except ApiException as e:
        raise ClusterError(f"cannot list services to build the sandbox's network policy: {e.reason}") from None
    for svc in services:
        spec = svc.spec
        if not spec.selector:
            continue
        for port in spec.ports or []:
            by_cluster_ip = endpoint.host == spec.cluster_ip and port.port == endpoint.port
            by_node_port = endpoint.host in node_ips and port.node_port == endpoint.port
            if by_cluster_ip or by_node_port:
                target = port.target_port if port.target_port is not None else port.port
                rules.append({"to": [{"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": svc.metadata.namespace}},
                    "podSelector": {"matchLabels": dict(spec.selector)}}],
                    "ports": [{"protocol": (port.protocol or "TCP"), "port": target}]})
    return rules


def node_addresses(kube: Any) -> set[str]:
    return {a.address for n in kube.core.list_node().items for a in (n.status.addresses or [])
            if a.type == "InternalIP"}


# -- manifests (pure) -----------------------------------------------------------------------------
def namespace_manifest(name: str) -> dict[str, Any]:
    """The sandbox namespace: Pod Security ``restricted`` enforced (and warned, audited), and the label
    the observability services admit its tool server by."""
    labels = dict(NAMESPACE_LABELS)
    labels.update({f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")})
    labels.update({f"pod-security.kubernetes.io/{mode}-version": "latest" for mode in ("enforce", "warn", "audit")})
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def secret_manifest(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque",
            "stringData": data}


@dataclass
class PodLimits:
    """CPU and memory of one sandbox pod (requests are a quarter)."""

    cpu: str = "500m"
    memory: str = "512Mi"
    scratch: str = "256Mi"  # each emptyDir (/tmp, HOME)


def pod_manifest(name: str, component: str, image: str, command: list[str], *, secret: str,
                 env: dict[str, str] | None = None, secret_env: Iterable[str] = (),
                 deadline_seconds: int, limits: PodLimits | None = None, port: int | None = None,
                 fence_canaries: Iterable[str] = ()) -> dict[str, Any]:
    """A hardened pod: non-root, read-only root, no capabilities, no host access, no API token.

    ``secret`` is mounted read-only at :data:`SECRET_DIR`; each name in ``secret_env`` becomes an
    environment variable read from the key of the same name in that Secret. With
    ``fence_canaries`` (``host:port`` an unfenced pod reaches) the pod's command starts only once
    none of them answers (see :data:`FENCE_CHECK`)."""
    limits = limits or PodLimits()
    container_env = [{"name": k, "value": v} for k, v in (env or {}).items()]
    container_env += [{"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k}}} for k in secret_env]
    container: dict[str, Any] = {
        "name": "main", "image": image, "command": command, "env": container_env,
        "imagePullPolicy": pull_policy(image), "workingDir": HOME_DIR,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "privileged": False,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "resources": {"limits": {"cpu": limits.cpu, "memory": limits.memory},
                      "requests": {"cpu": _quarter_cpu(limits.cpu), "memory": limits.memory}},
        "volumeMounts": [{"name": "secret", "mountPath": SECRET_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}, {"name": "home", "mountPath": HOME_DIR}],
    }
    if port is not None:
        container["ports"] = [{"name": "mcp", "containerPort": port, "protocol": "TCP"}]
        container["readinessProbe"] = {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 3}
    init = []
    canaries = list(fence_canaries)
    if canaries:
        init = [{**{k: v for k, v in container.items() if k not in ("ports", "readinessProbe", "env")},
                 "name": "network", "command": ["python3", "-c", FENCE_CHECK, str(FENCE_TIMEOUT), *canaries],
                 "terminationMessagePolicy": "FallbackToLogsOnError"}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {COMPONENT_LABEL: component}},
        "spec": {
            "restartPolicy": "Never", "automountServiceAccountToken": False, "enableServiceLinks": False,
            "hostNetwork": False, "hostPID": False, "hostIPC": False, "shareProcessNamespace": False,
            "terminationGracePeriodSeconds": 1, "activeDeadlineSeconds": max(1, int(deadline_seconds)),
            "securityContext": {"runAsNonRoot": True, "runAsUser": USER_ID, "runAsGroup": USER_ID,
                                "fsGroup": USER_ID, "seccompProfile": {"type": "RuntimeDefault"}},
            "initContainers": init,
            "containers": [container],
            "volumes": [{"name": "secret", "secret": {"secretName": secret, "defaultMode": 0o440}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": limits.scratch}},
                        {"name": "home", "emptyDir": {"sizeLimit": limits.scratch}}],
        },
    }


def pull_policy(image: str) -> str:
    """sregym's own images are imported into the node, never pulled (no registry has them)."""
    bare = image.removeprefix("docker.io/").removeprefix("localhost/")
    return "Never" if bare.startswith("sregym/") else "IfNotPresent"


def _quarter_cpu(cpu: str) -> str:
    millis = int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)
    return f"{max(10, millis // 4)}m"


def _tcp_rule(cidr: str, port: int) -> dict[str, Any]:
    return {"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"protocol": "TCP", "port": port}]}


def network_policies(*, api: list[dict[str, Any]], observability: list[dict[str, Any]], callback: Endpoint,
                     node_ips: Iterable[str], model_egress: Iterable[tuple[str, int]] = ()) -> list[dict[str, Any]]:
    """Default deny, then exactly the flows the tool server and agent pods need (see the module doc)."""
    def policy(name: str, selector: dict[str, Any], types: list[str], **rules: Any) -> dict[str, Any]:
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": name},
                "spec": {"podSelector": selector, "policyTypes": types, **rules}}

    tools = {"matchLabels": {COMPONENT_LABEL: "tools"}}
    agent = {"matchLabels": {COMPONENT_LABEL: "agent"}}
    from_conductor = [{"ipBlock": {"cidr": f"{ip}/32"}} for ip in sorted(node_ips)]
    return [
        policy("default-deny", {}, ["Ingress", "Egress"]),
        policy("tools", tools, ["Ingress", "Egress"],
               ingress=[{"from": [*from_conductor, {"podSelector": {}}],
                         "ports": [{"protocol": "TCP", "port": SERVER_PORT}]}],
               egress=[*api, *observability, _tcp_rule(callback.cidr, callback.port)]),
        policy("agent", agent, ["Egress"],
               egress=[*api, {"to": [{"podSelector": tools}], "ports": [{"protocol": "TCP", "port": SERVER_PORT}]},
                       *(_tcp_rule(cidr, port) for cidr, port in model_egress)]),
    ]


# -- the sandbox ----------------------------------------------------------------------------------
@dataclass
class PodOutcome:
    """How an agent pod ended."""

    exit_code: int | None
    timed_out: bool
    log_tail: str
    reason: str | None = None


@dataclass
class Sandbox:
    """One run's sandbox namespace, made with the conductor's (admin) client ``kube``.

    ``on_namespace(name)`` is called before the namespace is created (the conductor journals it)."""

    kube: Any
    agent_kubeconfig: str  # the kubeconfig text the agent is given (server URL, CA, token)
    callback_host: str | None = None
    image: str | None = None
    model_egress: list[tuple[str, int]] = field(default_factory=list)
    limits: PodLimits = field(default_factory=PodLimits)
    on_namespace: Callable[[str], None] = lambda name: None
    namespace: str = field(default_factory=new_namespace_name)
    created: bool = False
    api_endpoint: Endpoint | None = None
    pod_kubeconfig: str = ""
    fence_canaries: list[str] = field(default_factory=list)
    agent_fence_canaries: list[str] = field(default_factory=list)

    def open(self, callback_port: int, observability_urls: Iterable[str]) -> None:
        """Create the namespace, its network policies; nothing runs yet."""
        self.image = self.image or workbench_image()
        self.pod_kubeconfig, self.api_endpoint = pod_reachable_kubeconfig(self.agent_kubeconfig, self.kube)
        nodes = node_addresses(self.kube)
        callback = Endpoint(self.callback_host or local_address_for_pods(self.kube), callback_port)
        observability_urls = list(observability_urls)
        observability = [rule for url in observability_urls
                         for rule in service_peers(self.kube, url_endpoint(url), nodes)]
        api = service_peers(self.kube, self.api_endpoint, nodes)
        # what an unfenced pod reaches and no sandbox pod may: each node's kubelet, the API server when
        # another endpoint is handed over; agent pods also not the observability endpoints (the grader's)
        self.fence_canaries = [f"{ip}:10250" for ip in sorted(nodes)]
        advertised = api_server_endpoint(self.kube)
        if advertised != self.api_endpoint:
            self.fence_canaries.append(f"{advertised.host}:{advertised.port}")
        self.agent_fence_canaries = [*self.fence_canaries,
                                     *(f"{e.host}:{e.port}" for e in map(url_endpoint, observability_urls))]
        self.on_namespace(self.namespace)
        self._create(namespace_manifest(self.namespace))
        self.created = True
        for body in network_policies(api=api, observability=observability, callback=callback, node_ips=nodes,
                                     model_egress=self.model_egress):
            self._create(body)

    def _create(self, body: dict[str, Any]) -> None:
        from kubernetes import utils

        try:
            utils.create_from_dict(self.kube.api_client, body, namespace=self.namespace)
        except utils.FailToCreateError as e:
            reasons = "; ".join(f"{getattr(x, 'reason', x)} {(getattr(x, 'body', '') or '')[:300]}"
                                for x in e.api_exceptions)
            raise ClusterError(f"cannot create {body['kind']} {body['metadata']['name']} in the sandbox "
                               f"namespace {self.namespace}: {reasons}") from None

    def start_pod(self, name: str, component: str, command: list[str], *, secret_data: dict[str, str],
                  env: dict[str, str] | None = None, secret_env: Iterable[str] = (), deadline_seconds: float,
                  image: str | None = None, port: int | None = None) -> None:
        """A Secret ``name`` (mounted at :data:`SECRET_DIR`) and a hardened pod ``name``, whose command
        starts only once its network fence is proven in place (kube-router installs a pod's ingress
        and egress rules together, so this also covers who may connect to it)."""
        self._create(secret_manifest(name, secret_data))
        self._create(pod_manifest(name, component, image or self.image or workbench_image(), command,
                                  secret=name, env=env, secret_env=secret_env,
                                  deadline_seconds=int(deadline_seconds), limits=self.limits, port=port,
                                  fence_canaries=self.agent_fence_canaries if component == "agent"
                                  else self.fence_canaries))

    def _read_started(self, name: str) -> Any:
        """Pod ``name``; a pod whose container cannot start (no image, bad config) fails at once."""
        pod = self.kube.core.read_namespaced_pod(name, self.namespace)
        problem = _start_problem(pod)
        if problem:
            raise PrerequisiteError(f"sandbox pod {self.namespace}/{name} cannot start: {problem}",
                                    hint=_image_hint(pod))
        return pod

    def wait_ready(self, name: str, timeout: float = STARTUP_TIMEOUT) -> str:
        """Wait until pod ``name`` is Ready; return its IP. A pod that cannot start fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            pod = self._read_started(name)
            ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
            if ready and pod.status.pod_ip:
                return pod.status.pod_ip
            if time.monotonic() > deadline:
                raise PrerequisiteError(f"sandbox pod {self.namespace}/{name} is not ready after {timeout:g}s "
                                        f"(phase {pod.status.phase})",
                                        hint=f"kubectl -n {self.namespace} describe pod {name}; "
                                             f"kubectl -n {self.namespace} logs {name}")
            time.sleep(0.5)

    def wait_finished(self, name: str, timeout: float, poll: float = 1.0) -> PodOutcome:
        """Wait for pod ``name`` to end (or ``timeout``: then it is deleted); its exit code and log tail."""
        deadline = time.monotonic() + timeout
        timed_out = False
        while True:
            pod = self._read_started(name)
            if pod.status.phase in ("Succeeded", "Failed"):
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(poll)
        tail = self.log_tail(name)
        if timed_out:
            self.delete_pod(name)
            return PodOutcome(None, True, tail, "deadline")
        state = next((c.state.terminated for c in pod.status.container_statuses or [] if c.state.terminated), None)
        if state is None:  # the kubelet stopped it at activeDeadlineSeconds before it ran to its end
            return PodOutcome(None, pod.status.reason == "DeadlineExceeded", tail, pod.status.reason)
        return PodOutcome(state.exit_code, False, tail, state.reason)

    def log_tail(self, name: str, chars: int = 2000) -> str:
        try:
            text = self.kube.core.read_namespaced_pod_log(name, self.namespace, tail_lines=200)
        except ApiException:
            return ""
        return (text or "")[-chars:]

    def delete_pod(self, name: str) -> None:
        try:
            self.kube.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)
        except ApiException as e:
            if e.status != 404:
                raise

    def close(self, wait: float = 60.0) -> None:
        """Delete the namespace and wait until its pods are gone (nothing of the agent outlives the phase)."""
        if self.created:
            delete_sandbox_namespace(self.kube, self.namespace, wait=wait)
            self.created = False


def _start_problem(pod: Any) -> str | None:
    for status in pod.status.init_container_statuses or []:
        done = status.state.terminated if status.state else None
        if done and done.exit_code != 0:
            return (f"its network fence was not in place in time ({(done.message or '').strip()[:300]}); "
                    "is a NetworkPolicy engine running in the cluster?")
    for status in pod.status.container_statuses or []:
        waiting = status.state.waiting if status.state else None
        if waiting and waiting.reason in _FAILED_WAITING:
            return f"{waiting.reason}: {(waiting.message or '')[:300]}"
    return None


def _image_hint(pod: Any) -> str:
    image = pod.spec.containers[0].image
    if image.removeprefix("docker.io/").startswith("sregym/"):
        return f"build and load the sandbox image: `sregym images build --only {IMAGE_NAME}` (wanted {image})"
    return f"import {image} into the node's container runtime (or push it where the cluster pulls from)"


def delete_sandbox_namespace(kube: Any, name: str, *, wait: float = 60.0) -> None:
    """Delete a sandbox namespace: its pods at once (grace 0), then the namespace; wait until no pod runs."""
    if not name.startswith(NAMESPACE_PREFIX):  # cleanup reads names from a journal: never delete anything else
        raise UserInputError(f"{name!r} is not a sandbox namespace (they start with {NAMESPACE_PREFIX!r})")
    core = kube.core
    try:
        core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        core.delete_namespace(name)
    except ApiException as e:
        if e.status != 404:
            raise ClusterError(f"cannot delete the sandbox namespace {name}: {e.reason}") from None
        return
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            if not core.list_namespaced_pod(name).items:
                return
        except ApiException as e:
            if e.status == 404:
                return
            raise
        time.sleep(0.5)
    raise ClusterError(f"pods of the sandbox namespace {name} are still there after {wait:g}s",
                       hint=f"kubectl -n {name} get pods")
