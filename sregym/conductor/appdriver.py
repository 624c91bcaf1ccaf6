"""What the conductor needs from the apps layer: deploy (or reuse when healthy at the same chart
hash), health, and an SLO baseline. ``sregym.apps.app_driver`` provides it; any object with these
three methods works (the suite runner or a test may pass its own)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from sregym.apps import DeployedApp
from sregym.apps import app_driver as apps_driver
from sregym.cluster.handle import ClusterHandle
from sregym.core.problem import AppRef

__all__ = ["AppDriver", "DeployedApp", "app_driver"]


class AppDriver(Protocol):
    """Deploys apps and measures them; one per run (or suite)."""

    def deploy(self, app: AppRef, cluster: ClusterHandle) -> DeployedApp:
        """Install the app (or reuse a healthy install at the same chart hash) and wait until Ready."""

    def health(self, deployed: DeployedApp, cluster: ClusterHandle) -> tuple[bool, str]:
        """Whether every workload is ready and no pod crash-loops; the detail says what is not."""

    def baseline(self, deployed: DeployedApp, cluster: ClusterHandle, window_s: float) -> dict[str, Any]:
        """SLO measurements over ``window_s`` seconds, before any fault."""


def app_driver(charts_dirs: Sequence[Path] = ()) -> AppDriver:
    """The apps layer's driver over ``charts_dirs`` then the repository's ``charts/``."""
    return apps_driver(charts_dirs)
