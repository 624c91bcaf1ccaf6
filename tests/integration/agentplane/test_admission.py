"""Admission closes escalation: acting as the agent (its RBAC-limited kubeconfig, the real kubectl),
try to reach the node from the app namespace. Found live before this was fixed: the agent applied a
Deployment mounting the sregym state directory by hostPath, exec'd into it and read the run journal.

The app namespace is made by the code every deploy runs (``ensure_app_namespace``); the agent's
access (``live.agent_kubeconfig_for``: rights granted, its API proxy open). The Deployment itself may be accepted (Pod Security checks pods,
and only warns on their templates): what counts is that no such pod ever exists."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
import yaml
from kubernetes import client

from live import agent_kubeconfig_for
from sregym.apps.namespace import ensure_app_namespace, pod_security_labels
from sregym.cluster.images import image_ref
from sregym.cluster.kube import kubectl_path

pytestmark = pytest.mark.cluster

STATE_DIR = "/var/lib/sregym"


def container(**extra) -> dict:
    return {"name": "main", "image": image_ref("base"), "imagePullPolicy": "Never",
            "command": ["sleep", "3600"], **extra}


def deployment(name: str, pod_spec: dict) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"terminationGracePeriodSeconds": 1, **pod_spec}}}}


# Each way out of the container onto the node, as a Deployment the agent may create.
ESCALATIONS = {
    "state-reader": {"containers": [container(volumeMounts=[{"name": "s", "mountPath": "/s"}])],
                     "volumes": [{"name": "s", "hostPath": {"path": STATE_DIR}}]},
    "priv": {"containers": [container(securityContext={"privileged": True})]},
    "pidhost": {"hostPID": True, "containers": [container()]},
    "nethost": {"hostNetwork": True, "containers": [container()]},
    "capadd": {"containers": [container(securityContext={"capabilities": {"add": ["SYS_ADMIN", "SYS_PTRACE"]}})]},
}


@pytest.fixture(scope="module")
def app_ns(cluster, tmp_path_factory):
    """An app namespace as deploys make it, a healthy Deployment `web` in it, and the agent's kubeconfig
    (through its API proxy, as a run hands it over)."""
    kube = cluster.kube
    ns = f"adm-{uuid.uuid4().hex[:6]}"
    ensure_app_namespace(cluster, ns)
    kube.apps.create_namespaced_deployment(ns, deployment("web", {"containers": [container()]}))
    with agent_kubeconfig_for(cluster, ns, tmp_path_factory.mktemp("agent")) as kubeconfig:
        yield ns, kubeconfig
    kube.core.delete_namespace(ns)


def as_agent(kubeconfig, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real kubectl with the agent's kubeconfig (what the MCP kubectl tool runs)."""
    return subprocess.run([kubectl_path(), "--kubeconfig", str(kubeconfig), *args], input=input,
                          capture_output=True, text=True, timeout=60)


def pods_of(cluster, ns: str, name: str) -> list[str]:
    return [p.metadata.name for p in cluster.kube.core.list_namespaced_pod(ns, label_selector=f"app={name}").items]


def refusals(cluster, ns: str) -> dict[str, str]:
    """ReplicaSet name prefix -> the FailedCreate message that names Pod Security."""
    out = {}
    for e in cluster.kube.core.list_namespaced_event(ns).items:
        if e.reason == "FailedCreate" and "PodSecurity" in (e.message or ""):
            out[e.involved_object.name.rsplit("-", 1)[0]] = e.message
    return out


def test_the_app_namespace_enforces_pod_security_baseline(cluster, app_ns):
    ns, _ = app_ns
    labels = cluster.kube.core.read_namespace(ns).metadata.labels
    assert {k: labels.get(k) for k in pod_security_labels()} == pod_security_labels()
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"


def test_a_reused_namespace_gets_the_labels_too(cluster):
    ns = f"adm-old-{uuid.uuid4().hex[:6]}"
    cluster.kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        assert ensure_app_namespace(cluster, ns) is False  # existed: labelled in place
        labels = cluster.kube.core.read_namespace(ns).metadata.labels
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    finally:
        cluster.kube.core.delete_namespace(ns)


def test_no_escalating_pod_ever_runs(cluster, app_ns):
    """hostPath of the state directory, privileged, hostPID, hostNetwork, added capabilities: the
    agent's Deployments are refused or their pods are, and not one such pod exists meanwhile."""
    ns, kubeconfig = app_ns
    docs = "\n---\n".join(yaml.safe_dump(deployment(n, spec)) for n, spec in ESCALATIONS.items())
    applied = as_agent(kubeconfig, "-n", ns, "apply", "-f", "-", input=docs)
    seen: dict[str, list[str]] = {}
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        for name in ESCALATIONS:
            seen.setdefault(name, []).extend(pods_of(cluster, ns, name))
        if applied.returncode != 0 or set(ESCALATIONS) <= set(refusals(cluster, ns)):
            break
        time.sleep(1)
    assert {n: p for n, p in seen.items() if p} == {}, "a pod that reaches the node was admitted"
    if applied.returncode == 0:  # accepted as Deployments: every one's pods were refused by Pod Security
        assert set(ESCALATIONS) <= set(refusals(cluster, ns)), (applied.stdout, applied.stderr, refusals(cluster, ns))
        assert "violate PodSecurity" in applied.stderr  # the agent was warned at once, too
    else:
        assert "PodSecurity" in applied.stderr or "forbidden" in applied.stderr.lower()


def test_patching_an_app_deployment_to_mount_the_host_gets_its_pods_refused(cluster, app_ns):
    ns, kubeconfig = app_ns
    patch = {"spec": {"template": {"spec": {
        "volumes": [{"name": "s", "hostPath": {"path": STATE_DIR}}],
        "containers": [{"name": "main", "volumeMounts": [{"name": "s", "mountPath": "/s"}]}]}}}}
    out = as_agent(kubeconfig, "-n", ns, "patch", "deployment", "web", "-p", json.dumps(patch))
    assert out.returncode == 0, out.stderr  # the agent may edit workloads: that is its job
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and "web" not in refusals(cluster, ns):
        for pod in cluster.kube.core.list_namespaced_pod(ns, label_selector="app=web").items:
            assert not any(v.host_path for v in pod.spec.volumes or []), f"pod {pod.metadata.name} mounts the host"
        time.sleep(1)
    assert "web" in refusals(cluster, ns)


def test_a_service_with_external_ips_is_refused(cluster, app_ns):
    """DenyServiceExternalIPs: the agent cannot claim an address to intercept another's traffic."""
    ns, kubeconfig = app_ns
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "grab"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}], "externalIPs": ["10.96.0.1"]}}
    out = as_agent(kubeconfig, "-n", ns, "apply", "-f", "-", input=json.dumps(svc))
    assert out.returncode != 0
    assert "external IPs is denied" in out.stderr, out.stderr
    assert not [s for s in cluster.kube.core.list_namespaced_service(ns).items if s.metadata.name == "grab"]
