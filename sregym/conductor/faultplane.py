"""The run's fault plane: builds injectors, journals each change before making it, verifies,
and recovers in reverse order. Also rebuilds injectors from journal intents (``sregym cleanup``).

Injector methods are synchronous (they call the Kubernetes API); they run in worker threads so
the timeline scheduler and the agent phase keep going meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from sregym.conductor.journal import Intent, Journal
from sregym.core.constants import HIDDEN_NAMESPACE, OWNER_LABEL, OWNER_VALUE, RUN_LABEL
from sregym.core.errors import FaultError, SregymError
from sregym.core.problem import Selector
from sregym.core.seeds import derive_seed
from sregym.injectors import INJECTORS, FaultContext, Injector, Verification

Capabilities = Callable[[str], dict[str, bool]]


def node_capabilities_probe(kube: Any) -> Capabilities:
    """Probe each node once per run (``sregym.cluster.capabilities``). Without a cluster no
    capability is assumed: mechanisms that need one are then refused, never faked."""
    if kube is None:
        return lambda node: {}
    from sregym.cluster.capabilities import CapabilityCache

    return CapabilityCache(kube, HIDDEN_NAMESPACE)


def run_labels(run_id: str) -> dict[str, str]:
    """Labels an injector puts on every object it creates, so cleanup can find them."""
    return {OWNER_LABEL: OWNER_VALUE, RUN_LABEL: run_id}


def build_injector(intent: Intent, kube: Any, capabilities: Capabilities | None = None) -> Injector:
    """An injector from a journal intent (same name, params, target, mechanism, seed)."""
    cls = INJECTORS.get(intent.injector)
    params = cls.parse_params(intent.params, where=f"{intent.key}.params")
    target = Selector.model_validate(intent.target)
    by_name = {m.name: m for m in cls.mechanisms}
    if intent.mechanism not in by_name:
        raise FaultError(f"{intent.key}: injector {intent.injector!r} no longer has mechanism {intent.mechanism!r}")
    ctx = FaultContext(kube=kube, app_namespace=intent.app_namespace, hidden_namespace=intent.hidden_namespace,
                       seed=intent.seed, node_capabilities=capabilities or (lambda node: {}),
                       extras=dict(intent.extras))
    return cls(params, target, ctx, by_name[intent.mechanism])


def target_node(kube: Any, target: Selector, namespace: str) -> str | None:
    """The node a node-level fault acts on: the named node, else the node of the first selected pod."""
    if target.node:
        return target.node
    if kube is None:
        return None
    selector = ",".join(f"{k}={v}" for k, v in target.labels.items()) or None
    pods = kube.core.list_namespaced_pod(namespace, label_selector=selector).items
    pods = [p for p in pods if p.spec.node_name and (not target.name or p.metadata.name.startswith(target.name))]
    if pods:
        return pods[0].spec.node_name
    nodes = kube.core.list_node().items
    return nodes[0].metadata.name if len(nodes) == 1 else None


@dataclass
class Active:
    intent: Intent
    injector: Injector
    applied: bool = False
    recovered: bool = False


class FaultPlane:
    """Applies and removes the faults and noise of one run, journaling before each change."""

    def __init__(self, *, journal: Journal, kube: Any, app_namespace: str, run_id: str, run_seed: int,
                 capabilities: Capabilities | None = None, exclude: list[str] | None = None):
        self.journal = journal
        self.kube = kube
        self.app_namespace = app_namespace
        self.run_id = run_id
        self.run_seed = run_seed
        self.capabilities = capabilities or node_capabilities_probe(kube)
        self.exclude = exclude or []
        self.active: dict[str, Active] = {}
        self.order: list[str] = []

    def plan_intent(self, *, key: str, kind: str, injector: str, params: dict[str, Any], target: Selector,
                    mechanism: str | None) -> tuple[Intent, Injector]:
        """Build the injector, choose its mechanism on the target node, and let it plan (read-only)."""
        cls = INJECTORS.get(injector)
        parsed = cls.parse_params(params, where=f"{key}.params")
        if target.namespace is None:
            target = target.model_copy(update={"namespace": self.app_namespace})
        needs_node = any(m.requires for m in cls.mechanisms)
        node = target_node(self.kube, target, target.namespace or self.app_namespace) if needs_node else None
        caps = self.capabilities(node) if node else {}
        chosen = cls.choose_mechanism(caps, mechanism)
        seed = derive_seed(self.run_seed, kind, key)
        extras = {"run_id": self.run_id, "labels": run_labels(self.run_id), "exclude": list(self.exclude),
                  "node": node}
        ctx = FaultContext(kube=self.kube, app_namespace=self.app_namespace, hidden_namespace=HIDDEN_NAMESPACE,
                           seed=seed, node_capabilities=self.capabilities, extras=extras)
        inj = cls(parsed, target, ctx, chosen)
        state = inj.plan()
        intent = Intent(key=key, kind=kind, injector=injector, params=parsed.model_dump(mode="json"),
                        target=target.model_dump(mode="json", exclude_defaults=True), mechanism=chosen.name,
                        state=state, app_namespace=self.app_namespace, hidden_namespace=HIDDEN_NAMESPACE,
                        seed=seed, extras=extras)
        return intent, inj

    async def start(self, *, key: str, kind: str, injector: str, params: dict[str, Any], target: Selector,
                    mechanism: str | None = None) -> Intent:
        """Plan, journal the intent, inject, journal 'applied'. Returns the journaled intent."""
        intent, inj = await anyio.to_thread.run_sync(lambda: self.plan_intent(
            key=key, kind=kind, injector=injector, params=params, target=target, mechanism=mechanism))
        self.journal.intent(intent)
        act = self.active[key] = Active(intent, inj)
        self.order.append(key)
        try:
            await anyio.to_thread.run_sync(inj.inject, intent.state)
        except SregymError:
            raise
        except Exception as e:  # noqa: BLE001 - an injector bug or API refusal becomes a FaultError
            raise FaultError(f"{key}: injector {injector!r} failed to inject: {e}") from e
        act.applied = True
        self.journal.applied(key)
        return intent

    async def verify(self, key: str, *, timeout: float = 60.0, interval: float = 2.0) -> Verification:
        """Poll ``verify`` until it says the fault took effect, or ``timeout`` passes."""
        act = self.active[key]
        deadline = time.monotonic() + timeout
        last = Verification(False, "not checked")
        while True:
            try:
                last = await anyio.to_thread.run_sync(act.injector.verify, act.intent.state)
            except Exception as e:  # noqa: BLE001 - a transient API error is just "not yet"
                last = Verification(False, f"verify raised: {e}")
            if last.ok or time.monotonic() >= deadline:
                return last
            await anyio.sleep(interval)

    async def stop(self, key: str) -> None:
        """Recover one fault or noise event (idempotent) and journal it."""
        act = self.active.get(key)
        if act is None or act.recovered:
            return
        try:
            await anyio.to_thread.run_sync(act.injector.recover, act.intent.state)
        except Exception as e:
            self.journal.recover_failed(key, str(e))
            raise FaultError(f"{key}: recover of injector {act.intent.injector!r} failed: {e}",
                             hint="run `sregym cleanup` to retry") from e
        act.recovered = True
        self.journal.recovered(key)

    async def recover_all(self) -> list[str]:
        """Recover everything still active, newest first; returns the errors (never raises)."""
        errors = []
        for key in reversed(self.order):
            try:
                await self.stop(key)
            except Exception as e:  # noqa: BLE001 - keep recovering the rest
                errors.append(str(e))
        return errors

    def mechanisms(self) -> dict[str, str]:
        return {k: a.intent.mechanism for k, a in self.active.items() if a.intent.kind == "fault"}
