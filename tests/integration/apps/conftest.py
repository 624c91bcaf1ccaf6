"""Fixtures of the app cluster tests: the observability stack, deployed or reused."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def observability(cluster):
    """The stack's URLs from this host, with the stack deployed (or reused) and ready."""
    from sregym.apps import observability as stack

    stack.deploy_observability(cluster, timeout=600)
    return stack.endpoints(cluster)
