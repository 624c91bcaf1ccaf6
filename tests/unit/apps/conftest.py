"""Shared by the chart tests: they render with the real helm (offline)."""

from __future__ import annotations

import pytest

from sregym.cluster.kube import helm_path
from sregym.core.errors import PrerequisiteError


@pytest.fixture(scope="module")
def helm() -> str:
    """The helm binary; the module is skipped without it (the cluster build provides it)."""
    try:
        return str(helm_path())
    except PrerequisiteError:
        pytest.skip("helm is not installed (the cluster build provides it)")
