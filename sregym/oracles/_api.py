"""Mitigation oracles: reusable, parameterised checks of the live system referenced from problem
files (``oracles.mitigation: [{name: slo, params: {...}}]``). They judge the world, never the
code that broke it: an oracle must not import an injector (import-linter enforces it)."""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel

from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.params import NoParams, validate_params
from sregym.core.record import CheckResult
from sregym.core.registry import Registry

if TYPE_CHECKING:
    from sregym.cluster.kube import Kube

O = TypeVar("O", bound=type)


@dataclass
class MitigationContext:
    """``kube``: admin clients; ``namespace``: the app's; ``prometheus_url``: the in-cluster
    Prometheus as reached from the host; ``baseline``: SLO measurements taken before injection;
    ``app``: the app's description (``sregym.apps.spec.AppSpec``); ``hidden_namespace``: where
    fault-plane probes run (the agent cannot read it)."""

    kube: Kube | None
    namespace: str
    prometheus_url: str | None = None
    baseline: dict[str, Any] = field(default_factory=dict)
    app: Any = None
    window_seconds: float = 60.0
    hidden_namespace: str = HIDDEN_NAMESPACE


class MitigationOracle(abc.ABC):
    """Base of a mitigation oracle: ``check`` probes the live system and returns a CheckResult."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel, ctx: MitigationContext):
        self.params = params
        self.ctx = ctx

    @classmethod
    def parse_params(cls, raw: dict[str, Any], *, where: str = "params") -> BaseModel:
        return validate_params(cls.Params, raw, where=where, owner=f"oracle {cls.name!r}")

    @abc.abstractmethod
    def check(self) -> CheckResult:
        """Probe the live system (over ``ctx.window_seconds`` where it must persist)."""

    @classmethod
    def lag_seconds(cls, params: BaseModel) -> float:
        """How long after the system changes until this oracle's probe sees it: 0 for a probe of
        live state; a rate over a metrics window lags by that window. Validation waits this long
        after injecting before it expects the oracle to fail."""
        return 0.0


MITIGATION_ORACLES: Registry[type[MitigationOracle]] = Registry("mitigation oracle", "sregym.oracles", "oracles")


def mitigation_oracle(name: str) -> Callable[[O], O]:
    """Class decorator registering a mitigation oracle under ``name`` (``@mitigation_oracle("slo")``)."""
    return MITIGATION_ORACLES.plugin(name)
