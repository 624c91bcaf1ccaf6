"""A running cluster as the rest of sregym sees it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from sregym.cluster.kube import Kube
from sregym.core.errors import ClusterError


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

    @classmethod
    def of(cls, kube: Kube) -> ClusterHandle:
        """A handle around a client already made, for code that was given only the client (``sregym
        cleanup``) and must also run helm, which needs the kubeconfig file."""
        if kube.kubeconfig is None:
            raise ClusterError("the cluster's kubeconfig file is not known", hint="pass --kubeconfig")
        handle = cls(Path(kube.kubeconfig).stem, "existing", Path(kube.kubeconfig), kube.context)
        handle.__dict__["kube"] = kube  # what the cached property holds: this client, not a second one
        return handle
