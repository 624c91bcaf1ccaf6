"""Shared parts of noise: transient, self-recovering disturbances, with every choice seeded by
``ctx.seed``. Noise may touch the root-cause components too, wherever it neither cures nor masks
their fault, so being touched by noise proves no component innocent."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from sregym.core.errors import FaultError
from sregym.injectors._objects import list_objects

T = TypeVar("T")
NAME_LABELS = ("app", "app.kubernetes.io/name", "app.kubernetes.io/component", "component", "service")


class NoiseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    duration: float = Field(120, gt=0, description="seconds until it ends by itself")
    exclude: list[str] = Field(default_factory=list, description="components noise must not touch (the problem's own exclusions)")


def is_excluded(obj: dict, exclude: Sequence[str]) -> bool:
    """Whether an object (workload, pod, service) belongs to an excluded component: by its name,
    a name prefix (``geo`` excludes ``geo-7d9f``), or a component label value."""
    if not exclude:
        return False
    meta = obj["metadata"]
    name = meta["name"]
    labels = meta.get("labels") or {}
    tpl = ((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
    values = {labels.get(k) for k in NAME_LABELS} | {tpl.get(k) for k in NAME_LABELS}
    return any(name == e or name.startswith(f"{e}-") or e in values for e in exclude)


def candidates(ctx: Any, kind: str, exclude: Sequence[str], namespace: str | None = None, *,
               harmless: bool = False, restarts: bool = False) -> list[dict]:
    """Objects of ``kind`` in the app namespace that noise may touch, sorted by name.

    ``exclude`` (the noise's params: the problem's own exclusions) always holds. Of the run's
    root-cause components, ``harmless`` noise (log lines, a few extra requests, packets lost on top
    of whatever the fault does, in a chain of its own) spares none; noise that ``restarts`` pods
    spares only those a restart would cure (``ctx.cured_by_restart``: the ground truth's
    ``restart_cures``, a paused process), as every other fault outlives its pod (re-applied to the
    new one, or living in objects and volumes); any other noise spares them all (``ctx.exclude``)."""
    spared = [] if harmless else ctx.cured_by_restart if restarts else ctx.exclude
    exclude = [*exclude, *spared]
    objs = list_objects(ctx.kube, kind, namespace or ctx.app_namespace)
    return sorted((o for o in objs if not is_excluded(o, exclude)), key=lambda o: o["metadata"]["name"])


def choose(seed: int, purpose: str, items: Sequence[T], what: str) -> T:
    """A seeded choice (same seed and items, same pick); a clear error when nothing is eligible."""
    if not items:
        raise FaultError(f"noise: no eligible {what} outside the excluded components")
    return random.Random(f"{seed}:{purpose}").choice(list(items))


def token(*parts: Any) -> str:
    return "n" + hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:12]


def running(pods: list[dict]) -> list[dict]:
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]
