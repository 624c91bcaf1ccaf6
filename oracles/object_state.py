"""Fault-specific state: the mutated setting is back to a working value, and stays there.

``object_field``: one field of a named object (env var value, Service selector or port,
replicas, a probe, an image) checked against working values. ``configmap_value`` and
``secret_value`` do the same for one key of a ConfigMap or Secret; a Secret's value is compared
by sha256 digest and never printed.

A ConfigMap read through the environment reaches a container only when it starts: a fixed
object with pods still running the bad value has fixed nothing a user feels. So
``configmap_value`` also checks every running container that reads the key (``envFrom`` the
ConfigMap or ``configMapKeyRef`` to the key): it must have started after the key was last written
(the write time of the ``managedFields`` entry that owns the key), and a container whose own
``env`` sets the key must set a working value.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import Field, model_validator

from sregym.oracles import (MISSING, CheckResult, Condition, MitigationOracle, WindowParams, get_json, list_json,
                            lookup, mitigation_oracle, sample_window, window_of, window_result)


class ObjectFieldParams(WindowParams):
    kind: str = Field(..., description="e.g. deployment, service, statefulset, configmap")
    name: str
    namespace: str | None = None
    field: str = Field(..., description="dotted path, e.g. spec.template.spec.containers[name=geo].env[name=X].value")
    expect: Condition


class KeyParams(WindowParams):
    name: str
    key: str
    namespace: str | None = None


class ConfigMapValueParams(KeyParams):
    expect: Condition


class SecretValueParams(KeyParams):
    sha256_in: list[str] = Field(default_factory=list, description="digests of working values")
    sha256_not_in: list[str] = Field(default_factory=list, description="digests of broken values")

    @model_validator(mode="after")
    def _some_digest(self) -> SecretValueParams:
        if not (self.sha256_in or self.sha256_not_in):
            raise ValueError("give sha256_in (working digests) or sha256_not_in (broken digests)")
        return self


def shown(value: Any) -> Any:
    """A value as evidence: short, and ``<absent>`` when missing."""
    if value is MISSING:
        return "<absent>"
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


class _FieldOracle(MitigationOracle):
    """Samples one value over the window and tests it."""

    kind = ""

    def read(self, ns: str) -> tuple[Any, dict[str, Any]]:
        """(value or MISSING, evidence about it; ``stale``: what still runs another value)."""
        raise NotImplementedError

    def test(self, value: Any) -> tuple[bool, str]:
        return self.params.expect.holds(value)

    def check(self) -> CheckResult:
        ns = self.params.namespace or self.ctx.namespace

        def probe() -> tuple[bool, dict[str, Any]]:
            value, evidence = self.read(ns)
            ok, why = self.test(value)
            if ok and evidence.get("stale"):
                ok, why = False, "; ".join(evidence["stale"][:3])
            return ok, evidence | ({"reason": why} if not ok else {})

        samples = sample_window(probe, window_of(self.params, self.ctx.window_seconds), self.params.interval_seconds,
                                min_pass_fraction=self.params.min_pass_fraction)
        return window_result(self.name, samples, self.params.min_pass_fraction, evidence={"namespace": ns})


@mitigation_oracle("object_field")
class ObjectField(_FieldOracle):
    """A field of a named object holds a working value for the whole window."""

    Params = ObjectFieldParams

    def read(self, ns: str) -> tuple[Any, dict[str, Any]]:
        p = self.params
        obj = get_json(self.ctx.kube, p.kind, p.name, ns)
        value = MISSING if obj is None else lookup(obj, p.field)
        where = f"{p.kind}/{p.name}" + ("" if obj is not None else " (object absent)")
        return value, {"object": where, "field": p.field, "value": shown(value)}


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def key_written_at(configmap: dict[str, Any], key: str) -> datetime | None:
    """When ``data[key]`` was last written: the time of the managedFields entry that owns it
    (else the object's creation)."""
    owned = [_time(m.get("time")) for m in configmap["metadata"].get("managedFields") or []
             if f"f:{key}" in ((m.get("fieldsV1") or {}).get("f:data") or {})]
    owned = [t for t in owned if t]
    return max(owned) if owned else _time(configmap["metadata"].get("creationTimestamp"))


def how_read(container: dict[str, Any], configmap: str, key: str) -> tuple[str, Any]:
    """How a container gets ``key``: ("literal", value) from its own env, ("configmap", None) from
    the ConfigMap (envFrom or configMapKeyRef), or ("none", None)."""
    for e in container.get("env") or []:  # env wins over envFrom
        if e.get("name") == key:
            ref = (e.get("valueFrom") or {}).get("configMapKeyRef") or {}
            if ref:
                return ("configmap", None) if ref.get("name") == configmap and ref.get("key") == key else ("none", None)
            return ("literal", e.get("value", ""))
    for src in container.get("envFrom") or []:
        ref = src.get("configMapRef") or {}
        if ref.get("name") == configmap and key.startswith(src.get("prefix", "")):
            return ("configmap", None)
    return ("none", None)


def stale_containers(pods: list[dict[str, Any]], configmap: str, key: str, written: datetime | None,
                     expect: Condition, read_env: Callable[[str, str], str | None] | None = None) -> list[str]:
    """Running containers that still use a value of ``key`` other than the ConfigMap's working one:
    started before the key was written, or setting a broken value in their own env.

    ``read_env(pod, container)`` reads the value the container really runs with (its environment is
    fixed when it starts), and that value decides, for every container that reads the key: a
    container that started before the key was last written may also have started before the key was
    ever broken (managed fields keep only each writer's latest time), so the start time alone would
    fail a working system, and one that started after it may still run the broken value (measured
    after a helm rollback). A container whose environment cannot be read (an image without
    ``printenv``) is not judged; without a reader (pure logic) the start time decides."""
    out = []
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") or pod.get("status", {}).get("phase") != "Running":
            continue
        started = {cs["name"]: _time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
                   for cs in pod.get("status", {}).get("containerStatuses") or []}
        for c in pod.get("spec", {}).get("containers") or []:
            how, value = how_read(c, configmap, key)
            where = f"pod/{pod['metadata']['name']}/{c['name']}"
            if how == "literal":
                ok, why = expect.holds(value)
                if not ok:
                    out.append(f"{where} sets {key} in its own env ({why})")
            elif how == "configmap" and read_env is not None:
                # every container that reads the key, whenever it started: the key's write time is
                # no proof of when its value changed (after a helm rollback a rate pod the start
                # time called new still ran the broken value, and the oracle passed)
                running = read_env(pod["metadata"]["name"], c["name"])
                ok, why = expect.holds(running) if running is not None else (True, "")
                if not ok:
                    out.append(f"{where} runs {key}={shown(running)} ({why})")
            elif how == "configmap" and started.get(c["name"]) and written and started[c["name"]] < written:
                out.append(f"{where} started {started[c['name']]:%H:%M:%S}, before {key} was last written "
                           f"({written:%H:%M:%S}): it still runs the old value")
    return out


@mitigation_oracle("configmap_value")
class ConfigMapValue(_FieldOracle):
    """A ConfigMap key holds a working value for the whole window, and every running container
    that reads it started after it was written."""

    Params = ConfigMapValueParams

    def read(self, ns: str) -> tuple[Any, dict[str, Any]]:
        obj = get_json(self.ctx.kube, "configmap", self.params.name, ns, managed_fields=True)
        value = MISSING if obj is None else (obj.get("data") or {}).get(self.params.key, MISSING)
        evidence: dict[str, Any] = {"configmap": self.params.name, "key": self.params.key, "value": shown(value)}
        if obj is not None:
            key = self.params.key

            def read_env(pod: str, container: str) -> str | None:
                """The value the running container has (``printenv`` in it), or None if it cannot be read."""
                proc = self.ctx.kube.kubectl("exec", "-n", ns, pod, "-c", container, "--", "printenv", key,
                                             check=False, timeout=20)
                return proc.stdout.rstrip("\n") if proc.returncode == 0 else None

            stale = stale_containers(list_json(self.ctx.kube, "pods", ns), self.params.name, key,
                                     key_written_at(obj, key), self.params.expect, read_env)
            if stale:
                evidence["stale"] = stale[:10]
        return value, evidence


def digest(value: str | bytes) -> str:
    return hashlib.sha256(value.encode() if isinstance(value, str) else value).hexdigest()


@mitigation_oracle("secret_value")
class SecretValue(_FieldOracle):
    """A Secret key's sha256 is one of the working digests (or none of the broken ones)."""

    Params = SecretValueParams

    def read(self, ns: str) -> tuple[Any, dict[str, Any]]:
        obj = get_json(self.ctx.kube, "secret", self.params.name, ns)
        raw = None if obj is None else (obj.get("data") or {}).get(self.params.key)
        value = MISSING if raw is None else digest(base64.b64decode(raw))
        return value, {"secret": self.params.name, "key": self.params.key,
                       "sha256_prefix": "<absent>" if value is MISSING else value[:12]}

    def test(self, value: Any) -> tuple[bool, str]:
        p = self.params
        if value is MISSING:
            return False, "absent"
        if p.sha256_in and value not in p.sha256_in:
            return False, "digest is not one of the working values"
        if value in p.sha256_not_in:
            return False, "digest equals a broken value"
        return True, ""
