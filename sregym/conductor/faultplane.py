"""The run's fault plane: builds injectors, journals each change before making it, verifies,
and recovers in reverse order. Also rebuilds injectors from journal intents (``sregym cleanup``).

Injector methods are synchronous (they call the Kubernetes API); they run in worker threads so
the timeline scheduler and the agent phase keep going meanwhile.

A fault that dies with its pod (``Injector.dies_with_pod``) is kept in place the way its real cause
would be: while it is active a watcher thread polls the target's pods and, when a pod carrying the
fault is gone, plans the same primitive on a new pod of the target, journals that intent
(``<fault>#2``, ``#3``...) and injects it. Stopping the fault recovers every copy, newest first;
``sregym cleanup`` finds the copies as ordinary open intents.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from sregym.conductor.journal import Intent, Journal
from sregym.core.constants import HIDDEN_NAMESPACE
from sregym.core.errors import FaultError, MechanismUnavailable, SregymError
from sregym.core.problem import Selector
from sregym.core.seeds import derive_seed
from sregym.injectors import INJECTORS, FaultContext, Injector, Verification, run_labels, running_pods

Capabilities = Callable[[str], dict[str, bool]]


def node_capabilities_probe(kube: Any) -> Capabilities:
    """Probe each node once per run (``sregym.cluster.capabilities``). Without a cluster no
    capability is assumed: mechanisms that need one are then refused, never faked."""
    if kube is None:
        return lambda node: {}
    from sregym.cluster.capabilities import CapabilityCache

    return CapabilityCache(kube, HIDDEN_NAMESPACE)


COPY_SEPARATOR = "#"
# A target whose pods die every few seconds must not grow the journal without bound, so copies are
# made at most ``MAX_COPIES_PER_WINDOW`` per ``COPY_WINDOW_S``; past it the next copy waits, it is
# never dropped: a total cap (50 copies) let an agent that deleted the faulty pod 50 times shed the
# fault by restarts alone.
MAX_COPIES_PER_WINDOW = 30
COPY_WINDOW_S = 60.0


def fault_of(key: str) -> str:
    """The fault a journal key belongs to (``api_cut#2`` -> ``api_cut``)."""
    return key.split(COPY_SEPARATOR, 1)[0]


def build_injector(intent: Intent, kube: Any, capabilities: Capabilities | None = None) -> Injector:
    """An injector from a journal intent (same name, params, target, mechanism, seed)."""
    cls = INJECTORS.get(intent.injector)
    params = cls.parse_params(intent.params, where=f"{intent.key}.params")
    target = Selector.model_validate(intent.target)
    by_name = {m.name: m for m in cls.mechanisms}
    if intent.mechanism not in by_name:
        raise FaultError(f"{intent.key}: injector {intent.injector!r} no longer has mechanism {intent.mechanism!r}")
    ctx = FaultContext.from_journal(intent.extras, kube=kube, app_namespace=intent.app_namespace,
                                    hidden_namespace=intent.hidden_namespace, seed=intent.seed,
                                    node_capabilities=capabilities or (lambda node: {}))
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
    state: Any = None  # the planned state as the injector takes it (its ``State`` model or a dict)
    applied: bool = False
    recovered: bool = False


@dataclass
class Persisted:
    """A pod-scoped fault kept in place: its copies (journal keys, first = the fault's own) and the
    ones whose pod is gone (replaced by a newer copy)."""

    copies: list[str]
    replaced: set[str] = field(default_factory=set)
    pending: str = ""  # why the last dead copy could not be replaced yet

    def live(self) -> list[str]:
        return [k for k in self.copies if k not in self.replaced]


def running_carriers(pods: list[dict]) -> tuple[set[str], set[str]]:
    """The UIDs of ``pods``, and those UIDs with the ids of their running containers (what a copy's
    ``carriers`` must all be among to hold)."""
    uids = {p["metadata"]["uid"] for p in pods}
    containers = {c["containerID"] for p in pods for c in (p.get("status") or {}).get("containerStatuses") or []
                  if c.get("containerID") and "running" in (c.get("state") or {})}
    return uids, uids | containers


class FaultPlane:
    """Applies and removes the faults and noise of one run, journaling before each change."""

    def __init__(self, *, journal: Journal, kube: Any, app_namespace: str, run_id: str, run_seed: int,
                 capabilities: Capabilities | None = None, exclude: list[str] | None = None,
                 cured_by_restart: list[str] | None = None, reapply: bool = True, watch_interval: float = 2.0,
                 target_pods: Callable[[Injector], list[dict]] | None = None):
        """``exclude`` and ``cured_by_restart``: the run's root-cause components, and those of them
        a restart would cure (``FaultContext``; what noise spares). ``reapply=False`` (a problem
        whose ground truth says a restart cures it) lets pod-scoped faults die with their pods. ``target_pods(injector)`` lists the running pods of a fault's
        target (default: read from the cluster); the watcher polls it every ``watch_interval`` s."""
        self.journal = journal
        self.kube = kube
        self.app_namespace = app_namespace
        self.run_id = run_id
        self.run_seed = run_seed
        self.capabilities = capabilities or node_capabilities_probe(kube)
        self.exclude = exclude or []
        self.cured_by_restart = cured_by_restart or []
        self.active: dict[str, Active] = {}
        self.order: list[str] = []
        self.persisted: dict[str, Persisted] = {}
        self.reapplied: list[dict[str, Any]] = []  # what the run record lists
        self.watch_interval = watch_interval
        if not reapply:
            target_pods = None
        elif target_pods is None and kube is not None:
            target_pods = lambda inj: running_pods(inj.ctx, inj.target)  # noqa: E731
        self.target_pods = target_pods
        self._lock = threading.RLock()  # one change at a time: the watcher's, or a stop's
        self._halt = threading.Event()
        self._watcher: threading.Thread | None = None

    def plan_intent(self, *, key: str, kind: str, injector: str, params: dict[str, Any], target: Selector,
                    mechanism: str | None, seed: int | None = None,
                    only_pods: list[str] | None = None) -> tuple[Intent, Injector]:
        """Build the injector, choose its mechanism on the target node, and let it plan (read-only)."""
        cls = INJECTORS.get(injector)
        parsed = cls.parse_params(params, where=f"{key}.params")
        if target.namespace is None:
            target = target.model_copy(update={"namespace": self.app_namespace})
        needs_node = any(m.requires for m in cls.mechanisms)
        node = target_node(self.kube, target, target.namespace or self.app_namespace) if needs_node else None
        caps = self.capabilities(node) if node else {}
        chosen = cls.choose_mechanism(caps, mechanism)
        seed = derive_seed(self.run_seed, kind, key) if seed is None else seed
        ctx = FaultContext(kube=self.kube, app_namespace=self.app_namespace, hidden_namespace=HIDDEN_NAMESPACE,
                           seed=seed, run_id=self.run_id, labels=run_labels(self.run_id), exclude=list(self.exclude),
                           cured_by_restart=list(self.cured_by_restart),
                           node=node, only_pods=None if only_pods is None else list(only_pods),
                           node_capabilities=self.capabilities)
        inj = cls(parsed, target, ctx, chosen)
        state = inj.plan()
        intent = Intent(key=key, kind=kind, injector=injector, params=parsed.model_dump(mode="json"),
                        target=target.model_dump(mode="json", exclude_defaults=True), mechanism=chosen.name,
                        state=inj.dump_state(state), app_namespace=self.app_namespace,
                        hidden_namespace=HIDDEN_NAMESPACE, seed=seed, extras=ctx.journal_fields())
        return intent, inj

    @staticmethod
    def _active(intent: Intent, inj: Injector) -> Active:
        """What the plane tracks of a journaled intent: the state as the injector takes it is rebuilt
        from the journaled form, as cleanup rebuilds it after a crash."""
        return Active(intent, inj, inj.load_state(intent.state))

    async def start(self, *, key: str, kind: str, injector: str, params: dict[str, Any], target: Selector,
                    mechanism: str | None = None) -> Intent:
        """Plan, journal the intent, inject, journal 'applied'. Returns the journaled intent."""
        intent, inj = await anyio.to_thread.run_sync(lambda: self.plan_intent(
            key=key, kind=kind, injector=injector, params=params, target=target, mechanism=mechanism))
        self.journal.intent(intent)
        act = self.active[key] = self._active(intent, inj)
        self.order.append(key)
        try:
            await anyio.to_thread.run_sync(inj.inject, act.state)
        except SregymError:
            raise
        except Exception as e:  # noqa: BLE001 - an injector bug or API refusal becomes a FaultError
            raise FaultError(f"{key}: injector {injector!r} failed to inject: {e}") from e
        act.applied = True
        self.journal.applied(key)
        if kind == "fault" and self.target_pods is not None and inj.dies_with_pod():
            with self._lock:
                self.persisted[key] = Persisted([key])
            self._ensure_watcher()
        return intent

    # -- keeping pod-scoped faults in place ------------------------------------------------------
    def _ensure_watcher(self) -> None:
        if self._watcher is None or not self._watcher.is_alive():
            self._halt.clear()
            self._watcher = threading.Thread(target=self._watch, name="fault-persistence", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        while not self._halt.wait(self.watch_interval):
            for key in list(self.persisted):
                try:
                    self.keep(key)
                except Exception as e:  # noqa: BLE001 - an API hiccup: the next poll tries again
                    if key in self.persisted:
                        self.persisted[key].pending = f"{type(e).__name__}: {e}"

    def halt_watcher(self) -> None:
        """Stop re-applying (waits for a re-application in progress). Idempotent."""
        self._halt.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()

    def keep(self, key: str) -> list[str]:
        """One pass for fault ``key``: each copy whose pod is gone is replaced on a new pod of the
        target. Returns the new copies' keys (synchronous; the watcher thread calls it)."""
        with self._lock:
            kept = self.persisted.get(key)
            if kept is None or self._halt.is_set():
                return []
            first = self.active[key]
            try:
                pods = self.target_pods(first.injector)
            except SregymError:
                pods = []  # none running yet (the replacement is starting): next poll
            alive_pods, alive = running_carriers(pods)
            added = []
            for old in kept.live():
                if self._carriers(old) <= alive:
                    continue
                # a pod still carries a copy only while that copy holds (a restarted container in
                # the same pod gets the fault anew, planned on its new container)
                taken = set().union(*(self.active[k].injector.carrier_pods(self.active[k].state)
                                      for k in kept.live() if self._carriers(k) <= alive))
                fresh = sorted(alive_pods - taken)
                recent = sum(1 for r in self.reapplied if r["fault"] == key and time.time() - r["at"] < COPY_WINDOW_S)
                if recent >= MAX_COPIES_PER_WINDOW:
                    kept.pending = f"{old}: pod gone; {recent} copies in {COPY_WINDOW_S:.0f} s, the next waits"
                    continue
                if not fresh:
                    kept.pending = f"{old}: pod gone, no new running pod of {first.injector.target.describe()} yet"
                    continue
                new = self._reapply(key, kept, old, fresh, alive)
                if new:
                    added.append(new)
            return added

    def _carriers(self, key: str) -> set[str]:
        act = self.active[key]
        return act.injector.carriers(act.state)

    def _reapply(self, key: str, kept: Persisted, old: str, fresh: list[str], alive: set[str]) -> str | None:
        """Plan on one of the ``fresh`` pods, journal, inject. A copy whose inject failed is kept
        (so it is recovered) but counts as gone, so the next poll tries again. A plan whose carriers
        are not all running (``alive``) is dropped before anything is journaled: a container that
        just exited is still named by its pod's status until its next instance starts, and a copy
        planned on it would die at once (seen live: two copies for one restart)."""
        first = self.active[key].intent
        new = f"{key}{COPY_SEPARATOR}{len(kept.copies) + 1}"
        intent, inj = self.plan_intent(key=new, kind="fault", injector=first.injector, params=first.params,
                                       target=Selector.model_validate(first.target), mechanism=first.mechanism,
                                       seed=first.seed, only_pods=fresh)
        if not inj.carriers(inj.load_state(intent.state)) <= alive:
            kept.pending = f"{old}: gone; the new instance of its container is not running yet"
            return None
        self.journal.intent(intent)  # before the change, as for the first application
        act = self.active[new] = self._active(intent, inj)
        self.order.append(new)
        kept.copies.append(new)
        try:
            inj.inject(act.state)
        except Exception as e:
            kept.replaced.add(new)
            raise FaultError(f"{new}: re-applying injector {first.injector!r} on a new pod failed: {e}") from e
        act.applied = True
        self.journal.applied(new)
        kept.replaced.add(old)
        kept.pending = ""
        self.reapplied.append({"key": new, "fault": key, "replaces": old,
                               "pods": sorted(inj.carrier_pods(act.state)), "at": round(time.time(), 3)})
        return new

    def in_place(self) -> tuple[bool, str]:
        """Whether every kept fault has a copy on a running pod of its target (after pods were
        replaced: once the watcher has caught up), and what is still missing."""
        missing = []
        with self._lock:
            for key, kept in self.persisted.items():
                first = self.active[key]
                try:
                    _, alive = running_carriers(self.target_pods(first.injector))
                except SregymError:
                    alive = set()
                newest = kept.live()[-1] if kept.live() else first.intent.key
                if not self._carriers(newest) <= alive:
                    missing.append(f"{key} ({kept.pending or 'not re-applied yet'})")
        return not missing, "; ".join(missing)

    def current(self, key: str) -> str:
        """The newest copy of fault ``key`` (the key itself unless it was re-applied)."""
        kept = self.persisted.get(key)
        live = kept.live() if kept else []
        return live[-1] if live else key

    async def verify(self, key: str, *, timeout: float = 60.0, interval: float = 2.0) -> Verification:
        """Poll ``verify`` until it says the fault took effect, or ``timeout`` passes. A re-applied
        fault is verified on its newest copy."""
        act = self.active[self.current(key)]
        deadline = time.monotonic() + timeout
        last = Verification(False, "not checked")
        while True:
            try:
                last = await anyio.to_thread.run_sync(act.injector.verify, act.state)
            except Exception as e:  # noqa: BLE001 - a transient API error is just "not yet"
                last = Verification(False, f"verify raised: {e}")
            if last.ok or time.monotonic() >= deadline:
                return last
            await anyio.sleep(interval)

    async def stop(self, key: str) -> None:
        """Recover one fault or noise event (idempotent) and journal it; a re-applied fault's copies
        are recovered first, newest first."""
        if key in self.persisted:
            kept = await anyio.to_thread.run_sync(self._unwatch, key)
            for copy in reversed(kept.copies[1:]):
                await self._recover_one(copy)
        await self._recover_one(key)

    def _unwatch(self, key: str) -> Persisted:
        with self._lock:  # waits for a re-application in progress
            return self.persisted.pop(key, None) or Persisted([key])

    async def _recover_one(self, key: str) -> None:
        act = self.active.get(key)
        if act is None or act.recovered:
            return
        try:
            await anyio.to_thread.run_sync(act.injector.recover, act.state)
        except Exception as e:
            self.journal.recover_failed(key, str(e))
            raise FaultError(f"{key}: recover of injector {act.intent.injector!r} failed: {e}",
                             hint="run `sregym cleanup` to retry") from e
        act.recovered = True
        self.journal.recovered(key)

    async def recover_all(self) -> list[str]:
        """Recover everything still active, newest first; returns the errors (never raises)."""
        await anyio.to_thread.run_sync(self.halt_watcher)
        errors = []
        for key in reversed(self.order):
            try:
                await self.stop(key)
            except Exception as e:  # noqa: BLE001 - keep recovering the rest
                errors.append(str(e))
        return errors

    def layers(self) -> dict[str, str]:
        """Volume layer key -> mechanism."""
        return {k: a.intent.mechanism for k, a in self.active.items() if a.intent.kind == "layer"}

    def mechanisms(self) -> dict[str, str]:
        """Fault id -> mechanism (re-applications are listed by ``reapplied``)."""
        return {k: a.intent.mechanism for k, a in self.active.items()
                if a.intent.kind == "fault" and COPY_SEPARATOR not in k}


VOLUME_LAYER = ("latent_sector_error", "fuse-bad-blocks")  # the injector and mechanism that serve it


async def serve_volumes(plane: FaultPlane, app: Any) -> list[str]:
    """Serve the files each data store of ``app`` (an ``AppSpec``) declares in ``volume_layer``
    through the fault plane's block layer, every block good, in every run of the app before its
    baseline: a fault that makes blocks of them bad then only turns them bad in the server that
    already runs, and the store's containers see the same mounts in healthy and faulty runs.
    Journaled (kind ``layer``), recovered with the run's faults (last, being first) and by
    ``sregym cleanup``. Returns the keys served."""
    served = []
    for store in getattr(app, "datastores", None) or []:
        layer = store.volume_layer
        if layer is None:
            continue
        key = f"volume/{store.name}"
        try:
            await plane.start(key=key, kind="layer", injector=VOLUME_LAYER[0], params={"paths": layer.files, "blocks": []},
                              target=Selector(kind=store.kind, name=store.name, container=layer.container),
                              mechanism=VOLUME_LAYER[1])
        except MechanismUnavailable:
            continue  # a node without FUSE: the store's files are the disk's own, as are a fault's mounts
        served.append(key)
    return served
