"""A running cluster as the rest of sregym sees it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sregym.cluster.kube import Kube


@dataclass(frozen=True)
class ClusterHandle:
    name: str
    provider: str  # local | kind | existing
    kubeconfig: Path
    context: str | None = None
    data_dir: Path | None = None

    @cached_property
    def kube(self) -> Kube:
        return Kube(self.kubeconfig, self.context)
