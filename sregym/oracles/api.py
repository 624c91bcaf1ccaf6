"""Mitigation oracles: reusable, parameterised checks of the live system referenced from problem
files (``oracles.mitigation: [{name: slo, params: {...}}]``). They judge the world, never the
code that broke it: an oracle must not import an injector (import-linter enforces it)."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from sregym.core.errors import UserInputError
from sregym.core.record import CheckResult
from sregym.core.registry import Registry
from sregym.oracles.datafile import first_error


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


def validate_params(model: type[BaseModel], raw: dict[str, Any] | None, *, where: str, owner: str) -> BaseModel:
    """Validate an oracle's params; the error names the field, what was wrong and which oracle."""
    try:
        return model.model_validate(raw or {})
    except ValidationError as e:
        raise UserInputError(f"{where}.{first_error(e)} ({owner})") from None


@dataclass
class MitigationContext:
    """``kube``: admin clients; ``prometheus_url``: the in-cluster Prometheus as reached from the
    host; ``baseline``: SLO measurements taken before injection; ``app``: the app's description."""

    kube: Any
    namespace: str
    prometheus_url: str | None = None
    baseline: dict[str, Any] = field(default_factory=dict)
    app: Any = None
    window_seconds: float = 60.0
    extras: dict[str, Any] = field(default_factory=dict)


class MitigationOracle(abc.ABC):
    name: ClassVar[str] = ""
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


def mitigation_oracle(name: str):
    def decorate(cls: type[MitigationOracle]) -> type[MitigationOracle]:
        cls.name = name
        return MITIGATION_ORACLES.register(name)(cls)

    return decorate
