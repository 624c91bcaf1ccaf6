"""A locally built test image (a static Go HTTP server) loaded into the local cluster."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from sregym.cluster import oci
from sregym.cluster.local.paths import LocalPaths

TESTDATA = Path(__file__).parent / "testdata"
ECHO_IMAGE = "sregym.test/httpecho:1"


@pytest.fixture(scope="session")
def echo_image(cluster, tmp_path_factory) -> str:
    if cluster.provider != "local":
        pytest.skip("the test image is loaded straight into the local cluster's containerd")
    socket = LocalPaths(cluster.name).containerd_socket
    if not oci.image_present(socket, ECHO_IMAGE):
        out = tmp_path_factory.mktemp("echo")
        subprocess.run(["go", "build", "-trimpath", "-o", str(out / "httpecho"), "."], cwd=TESTDATA / "httpecho",
                       check=True, env={"CGO_ENABLED": "0", "PATH": "/usr/local/go/bin:/usr/bin:/bin",
                                        "HOME": "/root", "GOFLAGS": "-buildvcs=false"})
        archive = oci.write_docker_archive(out / "echo.tar", ECHO_IMAGE, {"/httpecho": (out / "httpecho", 0o755)},
                                           entrypoint=["/httpecho"])
        assert archive
        oci.import_archive(socket, out / "echo.tar")
    return ECHO_IMAGE


@pytest.fixture
def namespace(cluster):
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    cluster.kube.core.delete_namespace(name)
