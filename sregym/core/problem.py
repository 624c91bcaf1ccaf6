"""The problem spec: plain data (YAML in ``problems/``) validated by pydantic.

This module holds ground truth. The agent plane must never import it (an import-linter contract
in pyproject.toml enforces that).
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sregym.core.settings import RunSettings

PROBLEM_SCHEMA_VERSION = 1
ID_PATTERN = r"^[a-z][a-z0-9_]*$"


class Spec(BaseModel):
    """Base of every spec: unknown fields are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=False)


class Difficulty(str, Enum):
    easy = "easy"
    medium = "medium"
    hard = "hard"


class Split(str, Enum):
    train = "train"
    dev = "dev"
    test = "test"


class Layer(str, Enum):
    application = "application"
    kubernetes = "kubernetes"
    control_plane = "control-plane"  # the API server's own configuration (flow control, admission)
    os = "os"
    hardware = "hardware"
    network = "network"
    load = "load"
    none = "none"  # no-op controls


class Selector(Spec):
    """What a fault (or oracle) acts on. Empty fields match anything; ``namespace`` defaults to
    the app's namespace. Node faults name a node or take the node of the selected pod."""

    namespace: str | None = None
    kind: Literal[
        "Deployment", "StatefulSet", "DaemonSet", "Pod", "Service", "ConfigMap", "Secret",
        "PersistentVolumeClaim", "Node", "Namespace", "ServiceAccount", "Role", "RoleBinding",
    ] | None = None
    name: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    container: str | None = Field(None, description="container name inside the selected pods")
    node: str | None = Field(None, description="node name for node-level faults")

    def describe(self) -> str:
        parts = [self.kind or "*", self.name or ",".join(f"{k}={v}" for k, v in self.labels.items()) or "*"]
        if self.container:
            parts.append(f"container={self.container}")
        return "/".join(parts)


class FaultSpec(Spec):
    """One fault primitive applied to a target at an offset of the timeline."""

    id: str = Field(..., pattern=ID_PATTERN, description="name of this fault inside the problem")
    injector: str = Field(..., description="registered injector name, e.g. env_var, latent_sector_error")
    params: dict[str, Any] = Field(default_factory=dict, description="validated by the injector's Params model")
    target: Selector = Field(default_factory=Selector)
    at: float = Field(0.0, ge=0, description="seconds after the injection phase starts")
    duration: float | None = Field(
        None, gt=0, description="seconds until the conductor removes it; None = stays until recovered")
    role: Literal["root_cause", "trigger", "vulnerability", "secondary"] = "root_cause"
    mechanism: str | None = Field(None, description="force one mechanism; default: first the node supports")


class NoisePolicy(Spec):
    """Seeded transient disturbances that are never the root cause."""

    types: list[str] = Field(
        default_factory=lambda: ["pod_restart", "cpu_burst", "network_blip", "rolling_restart", "load_spike",
                                 "log_burst", "manual_edit"])
    per_window: int = Field(2, ge=0, description="how many noise events start in each window")
    window_seconds: float = Field(300, gt=0)
    duration_seconds: float = Field(120, gt=0)
    exclude: list[str] = Field(default_factory=list, description="extra components noise must not touch")


class GroundTruth(Spec):
    """What really happened: free text for the judge plus structured fields."""

    root_cause: str = Field(..., min_length=10)
    component: str = Field(..., description="the faulty component (service, node, volume, ...)")
    mechanism: str = Field(..., description="how it fails, in an SRE's words")
    details: list[str] = Field(default_factory=list, description="concrete mutated details (values, names)")
    scope: list[str] = Field(default_factory=list, description="components affected (victims included)")
    impact: str = Field("", description="user-visible impact")
    faulty_fault_ids: list[str] = Field(default_factory=list, description="which faults are the root cause")
    evidence: list[str] = Field(
        default_factory=list,
        description="where an SRE finds it: e.g. 'logs:geo', 'config:deployment/geo', 'metrics:postgres'")
    restart_cures: bool = Field(
        False, description="the real cause dies with the process (a hung or runaway process, a leak "
                           "that starts from zero), so restarting the faulty pods is a real cure: the "
                           "fault plane does not re-apply pod-scoped faults to new pods, and validation "
                           "does not expect the oracle to keep failing after every pod restarts")


class OracleRef(Spec):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class Oracles(Spec):
    diagnosis: OracleRef = Field(default_factory=lambda: OracleRef(name="checklist_judge"))
    mitigation: list[OracleRef] = Field(default_factory=list)


class AppRef(Spec):
    name: str = Field(..., description="a chart under charts/")
    namespace: str | None = Field(None, description="default: the app's own default namespace")
    values: dict[str, Any] = Field(default_factory=dict, description="Helm value overrides")
    load_rps: float | None = Field(None, gt=0, description="workload rate; default: the app's")


class Budgets(Spec):
    steps: int = Field(40, gt=0)
    seconds: float = Field(900, gt=0)
    tokens: int | None = Field(None, gt=0)


class Tags(Spec):
    layer: Layer
    fault_family: str
    failure_mode: str
    extra: list[str] = Field(default_factory=list)

    def all(self) -> list[str]:
        return [self.layer.value, self.fault_family, self.failure_mode, *self.extra]


class Problem(Spec):
    """One benchmark problem, as written in ``problems/<id>.yaml``."""

    schema_version: Literal[1] = PROBLEM_SCHEMA_VERSION
    id: str = Field(..., pattern=ID_PATTERN)
    title: str
    alert: str = Field(..., min_length=10,
                       description="what the on-call SRE is told (an alert or user report); never the fault")
    app: AppRef
    faults: list[FaultSpec] = Field(default_factory=list)
    noise: NoisePolicy = Field(default_factory=NoisePolicy)
    ground_truth: GroundTruth
    oracles: Oracles = Field(default_factory=Oracles)
    difficulty: Difficulty
    tags: Tags
    split: Split = Split.test
    budgets: Budgets = Field(default_factory=Budgets)
    no_op: bool = Field(False, description="a control: noise only, nothing to fix")

    @field_validator("alert")
    @classmethod
    def _alert_does_not_leak(cls, v: str) -> str:
        if re.search(r"\b(chaos|fault|inject\w*)\b", v, re.IGNORECASE):
            raise ValueError("the alert must not name the fault plane (words like 'fault', 'inject', 'chaos')")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Problem:
        ids = [f.id for f in self.faults]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"fault ids must be unique; repeated: {', '.join(dupes)}")
        for fid in self.ground_truth.faulty_fault_ids:
            if fid not in ids:
                raise ValueError(f"ground_truth.faulty_fault_ids names {fid!r}, which is not a fault id")
        if not self.no_op and not self.faults:
            raise ValueError("a problem needs at least one fault (or no_op: true for a control)")
        if self.no_op and any(f.role == "root_cause" for f in self.faults):
            raise ValueError("a no_op control must not have a root_cause fault")
        if not self.oracles.mitigation:
            raise ValueError("oracles.mitigation must name at least one mitigation oracle")
        return self

    def spec_hash(self) -> str:
        """sha256 of the canonical JSON of the spec: what a record says it ran."""
        canon = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()

    @property
    def root_cause_faults(self) -> list[FaultSpec]:
        chosen = set(self.ground_truth.faulty_fault_ids)
        return [f for f in self.faults if f.id in chosen or (not chosen and f.role == "root_cause")]


class Suite(Spec):
    """A named list of problems (by id or tag query), stored as ``problems/suites/<name>.yaml``."""

    name: str = Field(..., pattern=ID_PATTERN)
    description: str = ""
    problems: list[str] = Field(default_factory=list, description="problem ids")
    query: dict[str, Any] | None = Field(
        None, description="select by fields instead: {tags: [...], difficulty: [...], app: [...], split: [...]}")
    seeds: int = Field(1, gt=0)
    settings: RunSettings = Field(
        default_factory=RunSettings,
        description="how every cell is played (the run-settings schema of `sregym run --settings`); "
                    "`suite run` options and its --settings file override it; seeds and noise are the cells'")

    @field_validator("settings")
    @classmethod
    def _cells_choose_seed_and_noise(cls, v: RunSettings) -> RunSettings:
        if {"seed", "noise"} & v.model_fields_set:
            raise ValueError("seed and noise are chosen per cell: use the suite's seeds: and `suite run --noise`")
        return v
