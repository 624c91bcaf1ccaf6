"""Fault primitives: ``plan`` (read-only), ``inject``, ``verify``, ``recover`` (idempotent).

The conductor calls ``plan()`` first and writes its result to the journal *before* ``inject()``
changes anything. ``plan()`` must therefore decide everything ``recover()`` needs: original
values, and the deterministic names of any object ``inject()`` will create. After a crash,
``sregym cleanup`` rebuilds the injector from the journal and calls ``recover(state)`` with that
planned state, so ``recover`` must work whether ``inject`` ran fully, partly, or not at all.

A fault that lives in its target's pod (rules in the pod's network namespace, a process in its
cgroups, a tracer on its processes) dies with the pod, which no real partition, noisy neighbour or
failing disk does. Such a primitive says so (``pod_scoped = True``, or ``dies_with_pod()`` when it
depends on the mechanism); while the fault is active the fault plane watches the target's pods and
plans and injects the same primitive on each new pod that replaces one carrying it (a journaled
intent ``<fault>#2``, ``#3``...), as Chaos Mesh does for its selectors. ``carrier_pods(state)``
names the pods a planned state acts on (by default ``state["container"]["pod_uid"]``); a re-plan
is asked to choose among new pods only (``FaultContext.extras["only_pods"]``, honoured by
``sregym.injectors.node.running_pods``).

A primitive is one module under ``injectors/`` (or a third-party package registered under the
``sregym.injectors`` entry-point group)::

    @injector("env_var")
    class EnvVar(Injector[EnvVarParams]):
        Params = EnvVarParams
        targets = ("Deployment", "StatefulSet")
        def plan(self): ...
        def inject(self, state): ...
        def verify(self, state): ...
        def recover(self, state): ...
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from sregym.core.errors import MechanismUnavailable, UserInputError
from sregym.core.problem import Selector
from sregym.core.registry import Registry


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


P = TypeVar("P", bound=BaseModel)


@dataclass(frozen=True)
class Mechanism:
    """One real way to cause a fault. ``requires`` names node capabilities (see
    ``sregym.cluster.capabilities``) that must all be present for it to run."""

    name: str
    description: str
    requires: tuple[str, ...] = ()

    def missing(self, capabilities: dict[str, bool]) -> list[str]:
        return [c for c in self.requires if not capabilities.get(c, False)]


KUBERNETES_API = Mechanism("kubernetes-api", "change Kubernetes objects through the API server")


@dataclass
class Verification:
    ok: bool
    detail: str = ""


@dataclass
class FaultContext:
    """What an injector may use. Built by the conductor; never handed to the agent plane.

    ``kube`` is a ``sregym.cluster.kube.Kube`` (admin clients). ``hidden_namespace`` is where
    fault-plane workloads run: the agent's RBAC cannot read it. ``node_capabilities(node)``
    returns the probed capability map of a node. ``seed`` is derived from the run seed for this
    fault, so random choices (which pod, which blocks) repeat with the same seed.
    """

    kube: Any
    app_namespace: str
    hidden_namespace: str
    seed: int = 0
    node_capabilities: Callable[[str], dict[str, bool]] = field(default=lambda node: {})
    extras: dict[str, Any] = field(default_factory=dict)


class Injector(abc.ABC, Generic[P]):
    """Base class of a fault primitive. Subclasses set ``Params`` and may set ``mechanisms``,
    ``targets`` (accepted selector kinds), ``node_level`` and ``pod_scoped`` (the fault dies with
    its pod, so the fault plane re-applies it to new ones)."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    mechanisms: ClassVar[tuple[Mechanism, ...]] = (KUBERNETES_API,)
    targets: ClassVar[tuple[str, ...]] = ()
    node_level: ClassVar[bool] = False
    pod_scoped: ClassVar[bool] = False
    summary: ClassVar[str] = ""

    def __init__(self, params: P, target: Selector, ctx: FaultContext, mechanism: Mechanism):
        self.params = params
        self.target = target
        self.ctx = ctx
        self.mechanism = mechanism

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def parse_params(cls, raw: dict[str, Any], *, where: str = "params") -> BaseModel:
        """Validate raw parameters; errors name the field and what was expected."""
        try:
            return cls.Params.model_validate(raw or {})
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"]) or "(root)"
            raise UserInputError(f"{where}.{loc}: {first['msg']} (injector {cls.name!r})",
                                 hint=f"see `sregym show-injector {cls.name}` for its parameters") from None

    @classmethod
    def check_target(cls, target: Selector, *, where: str = "target") -> None:
        if cls.targets and target.kind and target.kind not in cls.targets:
            raise UserInputError(
                f"{where}.kind: injector {cls.name!r} acts on {', '.join(cls.targets)}, not {target.kind}")

    @classmethod
    def choose_mechanism(cls, capabilities: dict[str, bool], forced: str | None = None) -> Mechanism:
        """The first mechanism the node supports, or the forced one; refuse clearly otherwise."""
        by_name = {m.name: m for m in cls.mechanisms}
        if forced is not None:
            if forced not in by_name:
                raise UserInputError(f"mechanism {forced!r} is not one of injector {cls.name!r}'s: "
                                     f"{', '.join(by_name)}")
            missing = by_name[forced].missing(capabilities)
            if missing:
                raise MechanismUnavailable(
                    f"injector {cls.name!r}: mechanism {forced!r} needs {', '.join(missing)}, "
                    f"which the target node lacks", hint="run `sregym doctor` to see what each node supports")
            return by_name[forced]
        reasons = []
        for m in cls.mechanisms:
            missing = m.missing(capabilities)
            if not missing:
                return m
            reasons.append(f"{m.name} needs {', '.join(missing)}")
        raise MechanismUnavailable(f"injector {cls.name!r}: no mechanism works on the target node ("
                                   + "; ".join(reasons) + ")",
                                   hint="run `sregym doctor` to see what each node supports")

    # -- persistence ---------------------------------------------------------------------------
    def dies_with_pod(self) -> bool:
        """Whether this fault, with its chosen mechanism, is gone once its pod is (so the fault plane
        re-applies it to the target's new pods while it is active). Default: ``pod_scoped``."""
        return self.pod_scoped

    def carrier_pods(self, state: dict[str, Any]) -> set[str]:
        """UIDs of the pods whose deletion takes this planned fault with it."""
        container = state.get("container")
        uid = container.get("pod_uid") if isinstance(container, dict) else None
        return {uid} if uid else set()

    def dies_with_container(self) -> bool:
        """Whether this fault also goes when its container restarts in the same pod (a process in
        the container's cgroup, a tracer on its processes, a filter on its cgroup): the kubelet
        kills the container's cgroup and starts a new one. Default: False (a pod's network
        namespace, volumes and objects outlive its containers)."""
        return False

    def carriers(self, state: dict[str, Any]) -> set[str]:
        """What must still run for this planned fault to hold: its carrier pods' UIDs and, when it
        dies with its container, that container's id (as the pod status gives it)."""
        found = set(self.carrier_pods(state))
        container = state.get("container")
        if self.dies_with_container() and isinstance(container, dict) and container.get("container_id"):
            found.add(container["container_id"])
        return found

    # -- lifecycle ---------------------------------------------------------------------------
    def plan(self) -> dict[str, Any]:
        """Read the world and decide everything ``recover`` needs. No change allowed here."""
        return {}

    @abc.abstractmethod
    def inject(self, state: dict[str, Any]) -> None:
        """Apply the fault. ``state`` is what ``plan`` returned (already journaled)."""

    @abc.abstractmethod
    def verify(self, state: dict[str, Any]) -> Verification:
        """Whether the fault has taken effect (observed, not assumed)."""

    @abc.abstractmethod
    def recover(self, state: dict[str, Any]) -> None:
        """Undo the fault. Idempotent: safe after a partial inject, a crash, or a prior recover."""


INJECTORS: Registry[type[Injector]] = Registry("injector", "sregym.injectors", "injectors")


def injector(name: str, *, registry: Registry[type[Injector]] = INJECTORS):
    """Class decorator registering a fault primitive under ``name``."""

    def decorate(cls: type[Injector]) -> type[Injector]:
        cls.name = name
        if not cls.summary and cls.__doc__:
            cls.summary = cls.__doc__.strip().splitlines()[0]
        return registry.register(name)(cls)

    return decorate
