"""Images built offline land in the cluster's containerd and run as pods."""

import subprocess
import time
import uuid

import pytest
from kubernetes import client

from sregym.cluster.images import build_images, image_ref

pytestmark = pytest.mark.cluster


def socket_of(cluster):
    return cluster.data_dir / "containerd" / "containerd.sock" if cluster.data_dir else None


def test_base_image_is_loaded_into_the_clusters_containerd(cluster):
    if cluster.provider != "local":
        pytest.skip("containerd of our own only on the local provider")
    results = build_images(["base"], provider="local", cluster=cluster.name, socket=socket_of(cluster))
    assert [r.name for r in results] == ["base"]
    listed = subprocess.run(["ctr", "-a", str(socket_of(cluster)), "-n", "k8s.io", "images", "ls", "-q"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert "docker.io/" + image_ref("base") in listed
    assert "docker.io/sregym/base:bookworm" in listed
    # a second build with unchanged inputs neither rebuilds nor re-imports
    again = build_images(["base"], provider="local", cluster=cluster.name, socket=socket_of(cluster))
    assert again[0].status == "cached" and not again[0].loaded and again[0].seconds < 5


def test_a_pod_runs_the_base_image(cluster):
    if cluster.provider == "local":
        build_images(["base"], provider="local", cluster=cluster.name, socket=socket_of(cluster))
    core = cluster.kube.core
    ns = f"img-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        pod = client.V1Pod(
            metadata=client.V1ObjectMeta(name="base-smoke"),
            spec=client.V1PodSpec(restart_policy="Never", containers=[client.V1Container(
                name="smoke", image=image_ref("base"), image_pull_policy="Never",
                command=["python3", "-c", "import ssl, sys; print('base ok', sys.version_info[:2])"])]))
        core.create_namespaced_pod(ns, pod)
        deadline = time.monotonic() + 120
        phase = None
        while time.monotonic() < deadline:
            phase = core.read_namespaced_pod("base-smoke", ns).status.phase
            if phase in ("Succeeded", "Failed"):
                break
            time.sleep(1)
        assert phase == "Succeeded"
        assert "base ok (3, 11)" in core.read_namespaced_pod_log("base-smoke", ns)
    finally:
        core.delete_namespace(ns)
