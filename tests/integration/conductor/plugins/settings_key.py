"""Test plug-ins loaded with ``--plugins``: a fault that rewrites one ConfigMap key, and an oracle
that checks the key holds its healthy value. Real Kubernetes objects, no mocks; used by the
conductor's integration tests until the fault library provides its own primitives."""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, ConfigDict

from sregym.core.record import CheckResult
from sregym.injectors import Injector, Verification, injector
from sregym.oracles import MitigationOracle, mitigation_oracle


class SettingsKeyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    value: str


@injector("settings_key")
class SettingsKey(Injector[SettingsKeyParams]):
    """Set one key of a ConfigMap to a bad value; recover restores the original (or removes it)."""

    Params = SettingsKeyParams
    targets = ("ConfigMap",)

    def _ns(self) -> str:
        return self.target.namespace or self.ctx.app_namespace

    def _data(self) -> dict[str, str]:
        return self.ctx.kube.core.read_namespaced_config_map(self.target.name, self._ns()).data or {}

    def plan(self) -> dict[str, Any]:
        data = self._data()
        return {"name": self.target.name, "namespace": self._ns(), "had_key": self.params.key in data,
                "original": data.get(self.params.key)}

    def inject(self, state: dict[str, Any]) -> None:
        self.ctx.kube.core.patch_namespaced_config_map(state["name"], state["namespace"],
                                                       {"data": {self.params.key: self.params.value}})

    def verify(self, state: dict[str, Any]) -> Verification:
        now = self._data().get(self.params.key)
        return Verification(now == self.params.value, f"{self.params.key}={now!r}")

    def recover(self, state: dict[str, Any]) -> None:
        value = state["original"] if state["had_key"] else None  # None deletes the key in a merge patch
        try:
            self.ctx.kube.core.patch_namespaced_config_map(state["name"], state["namespace"],
                                                           {"data": {self.params.key: value}})
        except ApiException as e:
            if e.status != 404:  # the ConfigMap is gone: nothing left to undo
                raise


class KeyHoldsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    configmap: str
    key: str
    value: str


@mitigation_oracle("settings_key_holds")
class SettingsKeyHolds(MitigationOracle):
    """Passes when the ConfigMap key holds its healthy value."""

    Params = KeyHoldsParams

    def check(self) -> CheckResult:
        p = self.params
        data = self.ctx.kube.core.read_namespaced_config_map(p.configmap, self.ctx.namespace).data or {}
        now = data.get(p.key)
        return CheckResult(name=self.name, passed=now == p.value, evidence={"key": p.key, "value": now},
                           message=f"{p.key}={now!r}, healthy is {p.value!r}")
