"""The app descriptor, ``charts/<app>/sregym.yaml``: topology, data stores, workload and SLOs."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sregym.core.errors import UnknownNameError, UserInputError
from sregym.core.promql import render_query

DESCRIPTOR = "sregym.yaml"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ServiceSpec(_Spec):
    """One service of the app and what it calls or stores data in."""

    name: str
    kind: Literal["Deployment", "StatefulSet", "DaemonSet"] = "Deployment"
    depends_on: list[str] = Field(default_factory=list)
    claims: list[str] = Field(default_factory=list,
                              description="PersistentVolumeClaims its pods mount (a durable directory of its own)")


class VolumeLayerSpec(_Spec):
    """Files of a data store's volume that the fault plane serves through its block layer in every
    run (every block good), so a fault that makes blocks of them bad mounts nothing new."""

    container: str = Field(..., description="the data store's container that reads them")
    files: list[str] = Field(..., min_length=1, description="absolute paths inside that container")


class DatastoreSpec(_Spec):
    """A database, cache or queue the services depend on."""

    name: str
    kind: Literal["Deployment", "StatefulSet"] = "StatefulSet"
    engine: str = Field(..., description="postgresql, memcached, redis, nats-jetstream, ...")
    port: int
    persistent: bool = False
    credentials_secret: str | None = None
    volume_layer: VolumeLayerSpec | None = None


class Endpoint(_Spec):
    service: str
    port: int


class SettingsSpec(_Spec):
    configmap: str = Field(..., description="the ConfigMap every service reads its settings from")
    flags: dict[str, str] = Field(default_factory=dict, description="feature flags and what each turns on")


class WorkloadSpec(_Spec):
    """The in-cluster load generator: its Deployment, default rate and request mix."""

    service: str
    rps: float = Field(..., gt=0)
    rps_value: str = Field("loadgen.rps", description="the Helm value that sets the rate")
    mix: dict[str, float]


class SloSpec(_Spec):
    """A client-side objective; ``query`` is PromQL with ``$namespace``, ``$loadgen_namespace`` and
    ``$window`` placeholders and yields one number. ``kind`` says which way is better (latency: lower, in seconds)."""

    name: str
    kind: Literal["success_rate", "latency", "throughput", "error_rate", "availability"]
    objective: float
    query: str
    description: str = ""

    @property
    def higher_is_better(self) -> bool:
        return self.kind in ("success_rate", "throughput", "availability")

    def render(self, namespace: str, window: str) -> str:
        """The query for one namespace and rate window (e.g. ``"60s"``)."""
        return render_query(self.query, namespace, window)

    def met_by(self, value: float | None) -> bool:
        if value is None:
            return False
        return value >= self.objective if self.higher_is_better else value <= self.objective


class AppSpec(_Spec):
    """Everything sregym knows about one app besides its chart templates."""

    name: str
    description: str = ""
    namespace: str = Field(..., description="default namespace (one release per namespace)")
    entrypoint: Endpoint | None = None
    services: list[ServiceSpec] = Field(default_factory=list)
    datastores: list[DatastoreSpec] = Field(default_factory=list)
    images: dict[str, str] = Field(default_factory=dict,
                                   description="values key under `images` -> image name built from the repo")
    settings: SettingsSpec | None = None
    workload: WorkloadSpec | None = Field(None, description="None: the chart runs no load generator")
    slos: list[SloSpec] = Field(default_factory=list)
    chart: Path = Field(Path("."), description="the chart folder (set by load_app)")

    @model_validator(mode="after")
    def _topology_closed(self) -> AppSpec:
        known = {s.name for s in self.services} | {d.name for d in self.datastores}
        for s in self.services:
            missing = sorted(set(s.depends_on) - known)
            if missing:
                raise ValueError(f"service {s.name} depends on unknown {', '.join(missing)}")
        if self.entrypoint and self.entrypoint.service not in known:
            raise ValueError(f"entrypoint {self.entrypoint.service} is not a service")
        return self

    @property
    def components(self) -> list[str]:
        """Every workload the app runs in its own namespace (services, data stores); the load
        generator runs apart, in ``LOADGEN_NAMESPACE``, as ``<workload.service>-<namespace>``."""
        return [s.name for s in self.services] + [d.name for d in self.datastores]

    def slo(self, name: str) -> SloSpec:
        for s in self.slos:
            if s.name == name:
                return s
        raise UnknownNameError("SLO", name, [s.name for s in self.slos])


def charts_root() -> Path:
    """Where our app charts live: ``$SREGYM_CHARTS`` or the repository's ``charts/``."""
    return Path(os.environ.get("SREGYM_CHARTS", Path(__file__).resolve().parents[2] / "charts"))


def _roots(root: Path | Sequence[Path] | None) -> list[Path]:
    if root is None:
        return [charts_root(), charts_root() / "public"]
    return [Path(root)] if isinstance(root, (str, Path)) else [Path(r) for r in root]


def list_apps(root: Path | Sequence[Path] | None = None) -> list[str]:
    """Names of the charts under ``root`` (default: the repository's ``charts/`` and ``charts/public/``)."""
    return sorted({p.parent.name for r in _roots(root) for p in r.glob("*/Chart.yaml")})


def load_app(name: str, root: Path | Sequence[Path] | None = None) -> AppSpec:
    """The descriptor of app ``name``: ``<root>/<name>/sregym.yaml``, validated; errors name the file
    and field. A chart without a descriptor (a public or test chart) is an app with no workload and
    no SLOs whose namespace is its name. The first root that has the chart wins."""
    for base in _roots(root):
        chart = base / name
        if (chart / "Chart.yaml").is_file():
            break
    else:
        raise UnknownNameError("app", name, list_apps(root))
    path = chart / DESCRIPTOR
    if not path.is_file():
        return AppSpec(name=name, namespace=name.replace("_", "-"), chart=chart)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UserInputError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise UserInputError(f"{path}: must be a mapping of fields (name, namespace, services, ...)")
    try:
        spec = AppSpec.model_validate({**raw, "chart": str(chart)})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UserInputError(f"{path}: {where}: {first['msg']}", hint=f"{len(e.errors())} error(s) in all") from None
    if spec.name != name:
        raise UserInputError(f"{path}: name: {spec.name!r} differs from its folder {name!r}")
    return spec
