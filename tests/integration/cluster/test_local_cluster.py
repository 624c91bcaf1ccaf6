"""The local cluster runs real workloads: DNS + Services, helm, cgroup memory limits."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import yaml

from sregym.cluster.kube import helm_path
from polling import eventually

pytestmark = pytest.mark.cluster
TESTDATA = Path(__file__).parent / "testdata"


def _apply(cluster, docs: list[dict]) -> None:
    cluster.kube.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def _wait(predicate, timeout: float, what: str):
    return eventually(predicate, timeout, 1, what)


def test_node_is_ready_and_coredns_runs(cluster):
    nodes = cluster.kube.core.list_node().items
    assert any(c.type == "Ready" and c.status == "True" for n in nodes for c in n.status.conditions)
    pods = cluster.kube.core.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns").items
    assert pods and all(p.status.phase == "Running" for p in pods)


def test_service_answers_http_from_another_pod_by_dns_name(cluster, echo_image, namespace):
    labels = {"app": "echo"}
    _apply(cluster, [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "echo", "namespace": namespace},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
             "metadata": {"labels": labels},
             "spec": {"containers": [{"name": "echo", "image": echo_image, "imagePullPolicy": "Never",
                                      "ports": [{"containerPort": 8080}],
                                      "readinessProbe": {"httpGet": {"path": "/", "port": 8080},
                                                         "periodSeconds": 1}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo", "namespace": namespace},
         "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}},
    ])
    cluster.kube.kubectl("-n", namespace, "rollout", "status", "deployment/echo", "--timeout=90s")
    _apply(cluster, [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client", "namespace": namespace},
                      "spec": {"restartPolicy": "Never", "containers": [{
                          "name": "client", "image": echo_image, "imagePullPolicy": "Never",
                          "args": ["-get", f"http://echo.{namespace}.svc.cluster.local/"]}]}}])
    phase = _wait(lambda: cluster.kube.core.read_namespaced_pod("client", namespace).status.phase
                  in ("Succeeded", "Failed") and cluster.kube.core.read_namespaced_pod("client", namespace).status.phase,
                  90, "the client pod to finish")
    logs = cluster.kube.core.read_namespaced_pod_log("client", namespace)
    assert phase == "Succeeded", logs
    assert logs.startswith("hello from echo-")


def test_pod_over_its_memory_limit_is_oom_killed_and_restarted(cluster, echo_image, namespace):
    _apply(cluster, [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hog", "namespace": namespace},
                      "spec": {"restartPolicy": "Always", "containers": [{
                          "name": "hog", "image": echo_image, "imagePullPolicy": "Never", "args": ["-hog-mb", "200"],
                          "resources": {"limits": {"memory": "64Mi"}}}]}}])

    def oom_restarted():
        status = cluster.kube.core.read_namespaced_pod("hog", namespace).status.container_statuses or []
        for cs in status:
            last = cs.last_state.terminated if cs.last_state else None
            if cs.restart_count >= 1 and last is not None:
                return last.reason
        return None

    assert _wait(oom_restarted, 120, "an OOM kill and a restart") == "OOMKilled"


def test_helm_installs_a_chart(cluster, namespace):
    helm = helm_path()
    env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "KUBECONFIG": str(cluster.kubeconfig)}
    subprocess.run([helm, "install", "small", str(TESTDATA / "smallchart"), "-n", namespace, "--set", "message=hi",
                    "--wait", "--timeout", "60s"], check=True, capture_output=True, env=env)
    cm = cluster.kube.core.read_namespaced_config_map("small-settings", namespace)
    assert cm.data == {"message": "hi"}
    listed = subprocess.run([helm, "list", "-n", namespace, "-o", "json"], check=True, capture_output=True,
                            text=True, env=env).stdout
    assert '"status":"deployed"' in listed


def test_up_twice_is_idempotent(cluster):
    from sregym.cluster.local.provider import LocalCluster

    if cluster.provider != "local":
        pytest.skip("local provider only")
    local = LocalCluster(cluster.name)
    pids = local.daemon_pids()
    started = time.monotonic()
    local.up()
    assert local.daemon_pids() == pids  # nothing restarted
    assert time.monotonic() - started < 30
