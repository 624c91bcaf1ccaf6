"""`sregym mcp access`: an agent that brings its own loop gets a kubeconfig for the API proxy, with
the on-call SRE's cluster-wide read and nothing of the fault plane, for as long as the command runs.
Ctrl-C stops the proxy and revokes the access. Run as a user would, in a child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from sregym.cluster.kube import kubectl_path
from sregym.core.constants import HIDDEN_NAMESPACE

from agentplane_cluster_fixtures import ensure_namespace
from polling import eventually

pytestmark = pytest.mark.cluster


def test_mcp_access_serves_a_sealed_kubeconfig_until_ctrl_c(cluster, tmp_path: Path) -> None:
    namespace = f"access-{uuid.uuid4().hex[:6]}"
    ensure_namespace(cluster.kube.core, namespace)
    out = tmp_path / "access"
    proc = subprocess.Popen([sys.executable, "-m", "sregym", "mcp", "access", "-n", namespace, "--out", str(out),
                             "--hours", "0.1", "--kubeconfig", str(cluster.kubeconfig)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    kubeconfig = out / "agent.kubeconfig"
    try:
        assert eventually(kubeconfig.is_file, 90, 0.5), "no agent kubeconfig appeared"

        def agent(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([kubectl_path(), "--kubeconfig", str(kubeconfig), *args],
                                  capture_output=True, text=True, timeout=60)

        whoami = agent("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
        assert whoami.stdout == f"system:serviceaccount:{namespace}:sre-oncall", whoami.stderr
        namespaces = agent("get", "namespaces", "-o", "name")
        assert namespaces.returncode == 0 and "namespace/kube-system" in namespaces.stdout.split()
        assert f"namespace/{HIDDEN_NAMESPACE}" not in namespaces.stdout.split()
        everywhere = agent("get", "pods", "-A", "-o", "jsonpath={.items[*].metadata.namespace}")
        assert everywhere.returncode == 0 and everywhere.stdout and HIDDEN_NAMESPACE not in everywhere.stdout.split()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.kube.core.delete_namespace(namespace)
    assert proc.returncode == 0, stderr
    assert "revoked" in stdout + stderr
    assert not kubeconfig.exists()
    with pytest.raises(ApiException) as gone:
        cluster.kube.core.read_namespaced_service_account("sre-oncall", namespace)
    assert gone.value.status == 404
