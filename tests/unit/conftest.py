"""Fixtures shared by the unit tests (the agent plane's and the Gymnasium env's)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture()
def agent_kubeconfig(tmp_path: Path) -> Path:
    """An agent kubeconfig whose API server is a closed port: cluster calls fail like an unreachable API
    would, and `kubectl version --client` works."""
    path = tmp_path / "agent.kubeconfig"
    path.write_text(textwrap.dedent("""\
        apiVersion: v1
        kind: Config
        clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
        users: [{name: sre, user: {token: not-a-real-token}}]
        contexts: [{name: sre, context: {cluster: c, user: sre, namespace: shop}}]
        current-context: sre
        """))
    path.chmod(0o600)
    return path
