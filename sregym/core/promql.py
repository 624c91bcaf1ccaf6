"""The placeholders an app's SLO queries may use, filled in one place for every reader."""

from __future__ import annotations

from sregym.core.constants import LOADGEN_NAMESPACE


def render_query(query: str, namespace: str, window: str) -> str:
    """``$loadgen_namespace`` (where the load generator runs, out of the agent's reach),
    ``$namespace`` (the app's namespace) and ``$window`` (a rate window such as ``1m``)."""
    return (query.replace("$loadgen_namespace", LOADGEN_NAMESPACE).replace("$namespace", namespace)
            .replace("$window", window))
