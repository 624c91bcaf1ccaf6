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
names the pods a planned state acts on (by default the ``pod_uid`` of its ``container``); a re-plan
is asked to choose among new pods only (``FaultContext.only_pods``, honoured by ``running_pods``).

Planned state is plain JSON in the journal. A primitive may declare its shape as a pydantic model
(``State = MyState``, a :class:`PlannedState`): ``plan`` then returns an instance, and ``inject``,
``verify`` and ``recover`` receive one, rebuilt from the journal (an entry written before the model
existed has the same keys, so it still recovers). Without ``State`` the state is a ``dict``.

A primitive is one module under ``injectors/`` (or a third-party package registered under the
``sregym.injectors`` entry-point group)::

    @injector("env_var")
    class EnvVar(Injector[EnvVarParams]):
        Params = EnvVarParams
        State = EnvVarState            # optional: a PlannedState model
        targets = ("Deployment", "StatefulSet")
        def plan(self) -> EnvVarState: ...
        def inject(self, state): ...
        def verify(self, state): ...
        def recover(self, state): ...
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from sregym.core.constants import OWNER_LABEL, OWNER_VALUE, RUN_LABEL
from sregym.core.errors import MechanismUnavailable, UserInputError
from sregym.core.params import NoParams, validate_params
from sregym.core.problem import Selector
from sregym.core.registry import Registry

if TYPE_CHECKING:
    from sregym.cluster.kube import Kube
    from sregym.cluster.nodeagent import NodeRunner

P = TypeVar("P", bound=BaseModel)
I = TypeVar("I", bound="type[Injector]")  # noqa: E741


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


def run_labels(run_id: str = "") -> dict[str, str]:
    """Labels an injector puts on every object it creates, so cleanup can find them."""
    return {OWNER_LABEL: OWNER_VALUE, **({RUN_LABEL: run_id} if run_id else {})}


# What of the context the journal keeps (under an intent's ``extras``), so ``sregym cleanup`` can
# rebuild it in another process; the names are those journals have always used.
_JOURNALED = ("run_id", "labels", "exclude", "node", "only_pods")


@dataclass
class FaultContext:
    """What an injector may use. Built by the conductor; never handed to the agent plane.

    ``kube``: the admin clients. ``hidden_namespace``: where fault-plane workloads run (the agent's
    RBAC cannot read it). ``seed``: derived from the run seed for this fault, so random choices
    (which pod, which blocks) repeat with the same seed. ``run_id`` and ``labels``: the run, and the
    labels every object an injector creates must carry (cleanup finds them by these). ``exclude``:
    the run's root-cause components (spared by noise whose undo could cross a fault's, see
    ``noise_manual_edit``). ``cured_by_restart``: those of them a restart would cure (the ground
    truth's ``restart_cures``, a paused process), which noise that restarts pods spares (only plans
    read it, so the journal does not keep it).
    ``node``: the node the mechanism was chosen on (node-level faults). ``only_pods``: on a
    re-application, the UIDs of the new pods to choose among. ``node_capabilities(node)``: the
    probed capability map of a node. ``node_runner(node)``: how to run commands on a node (default:
    this host for the local provider, else the node pod in the hidden namespace).
    """

    kube: Kube | None
    app_namespace: str
    hidden_namespace: str
    seed: int = 0
    run_id: str = ""
    labels: dict[str, str] = field(default_factory=run_labels)
    exclude: list[str] = field(default_factory=list)
    cured_by_restart: list[str] = field(default_factory=list)
    node: str | None = None
    only_pods: list[str] | None = None
    node_capabilities: Callable[[str], dict[str, bool]] = field(default=lambda node: {})
    node_runner: Callable[[str], NodeRunner] | None = None

    def journal_fields(self) -> dict[str, Any]:
        """The JSON-safe part of the context the journal keeps (an intent's ``extras``)."""
        out = {"run_id": self.run_id, "labels": dict(self.labels), "exclude": list(self.exclude), "node": self.node}
        if self.only_pods is not None:
            out["only_pods"] = list(self.only_pods)
        return out

    @classmethod
    def from_journal(cls, extras: dict[str, Any], **fields: Any) -> FaultContext:
        """A context rebuilt from a journaled intent's ``extras`` (missing keys take defaults, so an
        entry written by an older version still recovers)."""
        kept = {k: extras[k] for k in _JOURNALED if extras.get(k) is not None}
        return cls(**fields, **kept)


class PlannedState(BaseModel):
    """Base of a primitive's typed planned state (``Injector.State``). Keys an older version of the
    primitive journaled are kept, so what was planned is what is recovered. Give every field a
    default: an entry journaled before a field existed still loads, and only what a state set is
    journaled back."""

    model_config = ConfigDict(extra="allow")

    # Read by key too, as the plain ``dict`` state of a primitive without a ``State`` model is:
    # scripts, tests and plug-ins written when every state was a dict keep working.
    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields or key in (self.model_extra or {}):
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in type(self).model_fields or key in (self.model_extra or {}))


class Injector(abc.ABC, Generic[P]):
    """Base class of a fault primitive. Subclasses set ``Params`` and may set ``mechanisms``,
    ``targets`` (accepted selector kinds), ``node_level`` and ``pod_scoped`` (the fault dies with
    its pod, so the fault plane re-applies it to new ones), and ``State`` (a :class:`PlannedState`
    model of what ``plan`` returns; without it the state is a ``dict``)."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    State: ClassVar[type[PlannedState] | None] = None
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
        return validate_params(cls.Params, raw, where=where, owner=f"injector {cls.name!r}",
                               hint=f"its parameters are the fields of {cls.__name__}.Params in {cls.__module__} "
                                    "(the built-ins' are listed in docs/injectors.md)")

    # -- planned state -------------------------------------------------------------------------
    @classmethod
    def load_state(cls, raw: dict[str, Any]) -> Any:
        """The planned state as the lifecycle methods take it, from its journaled form."""
        return cls.State.model_validate(raw) if cls.State is not None else raw

    @staticmethod
    def dump_state(state: Any) -> dict[str, Any]:
        """The journaled (JSON) form of a planned state."""
        # only what was set: a state loaded from an older journal entry is written back as it was
        return state.model_dump(mode="json", exclude_unset=True) if isinstance(state, BaseModel) else dict(state)

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

    @classmethod
    def ended_by_restart(cls, params: BaseModel) -> bool:
        """Whether restarting the target's pod ends this fault early, though the ground truth does
        not say a restart cures the problem (a paused process resumes as a new one): noise that
        restarts pods then spares its target. Default: no (the fault lives in objects or volumes,
        or the fault plane re-applies it to the new pod)."""
        return False

    def carrier_pods(self, state: Any) -> set[str]:
        """UIDs of the pods whose deletion takes this planned fault with it."""
        container = self.dump_state(state).get("container")
        uid = container.get("pod_uid") if isinstance(container, dict) else None
        return {uid} if uid else set()

    def dies_with_container(self) -> bool:
        """Whether this fault also goes when its container restarts in the same pod (a process in
        the container's cgroup, a tracer on its processes, a filter on its cgroup): the kubelet
        kills the container's cgroup and starts a new one. Default: False (a pod's network
        namespace, volumes and objects outlive its containers)."""
        return False

    def carriers(self, state: Any) -> set[str]:
        """What must still run for this planned fault to hold: its carrier pods' UIDs and, when it
        dies with its container, that container's id (as the pod status gives it)."""
        found = set(self.carrier_pods(state))
        container = self.dump_state(state).get("container")
        if self.dies_with_container() and isinstance(container, dict) and container.get("container_id"):
            found.add(container["container_id"])
        return found

    # -- lifecycle ---------------------------------------------------------------------------
    def plan(self) -> Any:
        """Read the world and decide everything ``recover`` needs. No change allowed here. Returns
        a ``State`` instance when the primitive declares one, else a JSON-safe ``dict``."""
        return self.State() if self.State is not None else {}

    @abc.abstractmethod
    def inject(self, state: Any) -> None:
        """Apply the fault. ``state`` is what ``plan`` returned (already journaled)."""

    @abc.abstractmethod
    def verify(self, state: Any) -> Verification:
        """Whether the fault has taken effect (observed, not assumed)."""

    @abc.abstractmethod
    def recover(self, state: Any) -> None:
        """Undo the fault. Idempotent: safe after a partial inject, a crash, or a prior recover."""


INJECTORS: Registry[type[Injector]] = Registry("injector", "sregym.injectors", "injectors")


def injector(name: str) -> Callable[[I], I]:
    """Class decorator registering a fault primitive under ``name`` (``@injector("pod_kill")``)."""
    return INJECTORS.plugin(name)
