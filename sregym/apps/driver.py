"""The conductor's app driver: deploy (or reuse), health and the SLO baseline of any app.

It satisfies ``sregym.conductor.episode.AppDriver`` structurally (this layer cannot import the
conductor), and returns objects with the fields of its ``DeployedApp``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sregym.apps import lifecycle
from sregym.apps.slo import measure_slos
from sregym.apps.spec import AppSpec, charts_root, load_app
from sregym.cluster.entry_path import entry_path as path_of, read_app_paths
from sregym.cluster.handle import ClusterHandle
from sregym.cluster.local.paths import private_dir, state_root
from sregym.core.promql import MIN_RATE_WINDOW_SECONDS


@dataclass
class DeployedApp:
    """An app running in the cluster (same fields as the conductor's ``DeployedApp``); ``info`` is
    the app's :class:`AppSpec` (its SLOs, topology and workload) for the mitigation oracles."""

    name: str
    namespace: str
    chart_hash: str | None = None
    reused: bool = False
    prometheus_url: str | None = None
    traces_url: str | None = None
    logs_url: str | None = None
    info: Any = None
    components: list[str] = field(default_factory=list)


def observability_urls(cluster: ClusterHandle, progress: Callable[[str], None] = lambda m: None
                       ) -> dict[str, str | None]:
    """Prometheus, trace (Jaeger API) and log query URLs reachable from this host."""
    from sregym.apps import observability

    urls = observability.endpoints(cluster, progress)
    return {"prometheus_url": urls.get("prometheus"), "traces_url": urls.get("traces"), "logs_url": urls.get("logs")}


def workload_probes(cluster: ClusterHandle, namespace: str) -> dict[str, dict[str, dict[str, Any]]]:
    """``Kind/name -> container -> {readinessProbe, livenessProbe, startupProbe}`` of every
    Deployment and StatefulSet in ``namespace`` as the API server holds them (defaults filled in)."""
    api = cluster.kube.api_client
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for kind, items in (("Deployment", cluster.kube.apps.list_namespaced_deployment(namespace).items),
                        ("StatefulSet", cluster.kube.apps.list_namespaced_stateful_set(namespace).items)):
        for w in items:
            containers = api.sanitize_for_serialization(w.spec.template.spec).get("containers") or []
            out[f"{kind}/{w.metadata.name}"] = {
                c["name"]: {k: c[k] for k in ("readinessProbe", "livenessProbe", "startupProbe") if c.get(k)}
                for c in containers}
    return out


def app_paths(cluster: ClusterHandle, namespace: str) -> dict[str, Any]:
    """Who answers each of the app's Services, and the addresses its workloads are given
    (:func:`sregym.cluster.entry_path.app_paths`)."""
    return read_app_paths(cluster.kube, namespace)


def set_path(values: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """``values`` with ``a.b.c`` set to ``value`` (creating the nested dicts)."""
    node = values
    *parents, last = dotted.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return values


class AppsDriver:
    """Deploys apps from chart folders (the given ones first, then the repository's ``charts/``)."""

    def __init__(self, charts_dirs: Sequence[Path] = (), *, timeout_s: float = 600):
        self.roots = [*map(Path, charts_dirs), charts_root(), charts_root() / "public"]
        self.timeout_s = timeout_s
        self._endpoints: tuple[ClusterHandle, dict[str, str | None]] | None = None  # (cluster, its URLs)

    def spec(self, name: str) -> AppSpec:
        return load_app(name, self.roots)

    def endpoints(self, app: Any, cluster: ClusterHandle, progress: Callable[[str], None] = lambda m: None
                  ) -> DeployedApp:
        """The first part of :meth:`deploy`: the observability stack (deployed or reused) and the
        app's namespace (made, with its Pod Security labels), as a ``DeployedApp`` that names only
        the namespace and the stack's URLs: what the agent plane needs to open while the release
        itself is checked (or installed) by :meth:`deploy`, which then does not do this again (the
        next call of :meth:`deploy` on this cluster only)."""
        from sregym.apps.namespace import ensure_app_namespace
        from sregym.apps.observability import deploy_observability

        # The stack first: the app exports traces to it, and the baseline reads its Prometheus.
        # Reused in about 2 s when it is already ready at the same chart hash.
        deploy_observability(cluster, progress=progress)
        spec = self.spec(app.name)
        namespace = app.namespace or spec.namespace
        ensure_app_namespace(cluster, namespace)
        self._endpoints = (cluster, observability_urls(cluster, progress))
        return DeployedApp(name=spec.name, namespace=namespace, info=spec, components=spec.components,
                           **self._endpoints[1])

    def deploy(self, app: Any, cluster: ClusterHandle, progress: Callable[[str], None] = lambda m: None) -> DeployedApp:
        """Deploy a problem's ``AppRef`` (name, namespace, values, load_rps) or reuse it; wait for Ready.
        ``progress`` is told what a person should know (a port-forward to the stack opened)."""
        if self._endpoints is None or self._endpoints[0] is not cluster:
            self.endpoints(app, cluster, progress)
        assert self._endpoints is not None
        urls, self._endpoints = self._endpoints[1], None  # once: a driver that serves runs asks anew each
        spec = self.spec(app.name)
        values = dict(app.values or {})
        if getattr(app, "load_rps", None) and spec.workload:
            set_path(values, spec.workload.rps_value, app.load_rps)
        result = lifecycle.deploy(cluster, spec, app.namespace, values, timeout=self.timeout_s)
        return DeployedApp(name=spec.name, namespace=result.namespace, chart_hash=result.chart_hash,
                           reused=result.reused, info=spec, components=spec.components, **urls)

    def health(self, deployed: DeployedApp, cluster: ClusterHandle) -> tuple[bool, str]:
        current = lifecycle.status(cluster, deployed.info or self.spec(deployed.name), deployed.namespace)
        return current.ready, "; ".join(current.problems) or "all workloads ready"

    def baseline(self, deployed: DeployedApp, cluster: ClusterHandle, window_s: float) -> dict[str, Any]:
        """Record each workload's probes and who answers the app's requests (``paths``: every
        Service's path and the wiring, :mod:`sregym.cluster.entry_path`; ``entry``: the entry
        Service's, one of them), let the workload run ``window_s`` seconds
        (at least ``MIN_RATE_WINDOW_SECONDS``: a shorter rate is too few requests to compare with),
        then measure every SLO over that window. Taken before any fault: the oracles compare with it.

        The SLO measurement is reused (:class:`BaselineStore`, across processes) for the same release
        state of the app within ``BASELINE_REUSE_SECONDS``; the probes and the path are recorded every time."""
        window_s = max(window_s, MIN_RATE_WINDOW_SECONDS)
        spec = deployed.info or self.spec(deployed.name)
        healthy, detail = self.health(deployed, cluster)
        probes = workload_probes(cluster, deployed.namespace)
        probes_and_path: dict[str, Any] = {"probes": probes}
        if spec.entrypoint:  # the SLO oracle fails where someone else answers the app's requests (a stub, a copy)
            paths = app_paths(cluster, deployed.namespace)  # the entry's is one of them: one read
            probes_and_path["paths"] = paths
            probes_and_path["entry"] = paths["services"].get(spec.entrypoint.service) or path_of(None, [], [], [], [])
        if not spec.slos or not deployed.prometheus_url:
            why = "this chart has no SLOs" if not spec.slos else "no Prometheus URL is known"
            return {"healthy": healthy, "detail": detail, "measured": f"workload readiness only ({why})",
                    **probes_and_path}
        store = BaselineStore.of(cluster, deployed.namespace) if deployed.chart_hash else None
        if store is not None and not deployed.reused:  # (re)installed: what was kept measured the release before
            store.forget()
        earlier = store.reusable(deployed.chart_hash, window_s) if store and healthy and deployed.reused else None
        if earlier is not None:
            slos, age = earlier
            return {"healthy": healthy, "detail": detail, "window_s": window_s, "slos": slos, "met": True,
                    **probes_and_path, "measured": f"reused: measured {age:.0f} s ago at the same release state"}
        time.sleep(window_s)
        slos = measure_slos(deployed.prometheus_url, spec, deployed.namespace, window_s)
        met = all(s["met"] for s in slos.values())
        if store is not None and healthy and met:
            store.keep(deployed.chart_hash, window_s, slos)
        return {"healthy": healthy, "detail": detail, "window_s": window_s, "slos": slos, "met": met,
                **probes_and_path}


# How long an SLO baseline stands for its app. The baseline is what the healthy app does under the
# load generator: it changes with the release (chart, values, load: the chart hash), not from one
# episode to the next, so re-measuring it before every episode only waits. A fresh one is taken
# after a (re)install, when the app is not healthy, or when the earlier one missed an objective.
BASELINE_REUSE_SECONDS = 600.0


@dataclass(frozen=True)
class BaselineStore:
    """The SLO baselines last measured in one namespace, kept on the conductor's host
    (``$SREGYM_STATE/baselines/<namespace uid>.json``) so that the next process reuses them too:
    ``sregym run`` and ``sregym validate`` of one problem each start a process, and each waited out
    a baseline window of its own (20 s of a validation's 74 s, measured 2026-11-28).

    It is keyed by the namespace's UID, not its name: a namespace made again, or another cluster's
    namespace of the same name, never finds it. It holds only baselines that met every objective
    on a healthy app, under the release's chart hash, for ``BASELINE_REUSE_SECONDS`` of wall time;
    one per window length (a run's 30 s baseline and a validation's 20 s one do not push each other
    out; a longer one serves a shorter request). The folder is the conductor's (mode 0700, out of
    the agent's sandbox), and an entry that does not read as one of these (cut short, edited) is
    measured again, never trusted."""

    path: Path

    @classmethod
    def of(cls, cluster: ClusterHandle, namespace: str) -> BaselineStore | None:
        uid = namespace_uid(cluster, namespace)
        return cls(state_root() / "baselines" / f"{uid}.json") if uid else None

    def _entries(self) -> list[dict[str, Any]]:
        """The kept entries that read as baselines within the reuse period (any other is left out)."""
        try:
            doc = json.loads(self.path.read_text())
            kept = doc["baselines"] if isinstance(doc, dict) else []
        except (OSError, ValueError, KeyError, TypeError):
            return []
        out = []
        for e in kept if isinstance(kept, list) else []:
            try:
                entry = {"chart_hash": str(e["chart_hash"]), "window_s": float(e["window_s"]),
                         "measured_at": float(e["measured_at"]), "slos": e["slos"]}
            except (KeyError, TypeError, ValueError):
                continue
            slos = entry["slos"]
            if (isinstance(slos, dict) and slos and all(isinstance(v, dict) and v.get("met") is True for v in slos.values())
                    and 0 <= time.time() - entry["measured_at"] <= BASELINE_REUSE_SECONDS):
                out.append(entry)
        return out

    def reusable(self, chart_hash: str | None, window_s: float) -> tuple[dict[str, Any], float] | None:
        """The newest SLO measurements kept for ``chart_hash`` over at least ``window_s`` within
        the reuse period, with their age in seconds; None when there are none."""
        fits = [e for e in self._entries() if e["chart_hash"] == chart_hash and e["window_s"] >= window_s]
        if not fits:
            return None
        newest = max(fits, key=lambda e: e["measured_at"])
        return newest["slos"], time.time() - newest["measured_at"]

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)

    def keep(self, chart_hash: str | None, window_s: float, slos: dict[str, Any]) -> None:
        """Add the baseline (replacing one of the same window; entries of another chart hash or
        too old go), written atomically: a reader sees the old file or the new one. A folder that
        cannot be written only costs the next process its wait."""
        entries = [e for e in self._entries() if e["chart_hash"] == chart_hash and e["window_s"] != window_s]
        entries.append({"chart_hash": chart_hash, "window_s": window_s, "measured_at": time.time(), "slos": slos})
        try:
            private_dir(self.path.parent)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            tmp.write_text(json.dumps({"baselines": entries}))
            os.replace(tmp, self.path)
            for other in self.path.parent.glob("*.json"):  # namespaces gone since: nothing there can be reused
                if other != self.path and time.time() - other.stat().st_mtime > BASELINE_REUSE_SECONDS:
                    other.unlink(missing_ok=True)
        except OSError:
            pass


def namespace_uid(cluster: ClusterHandle, namespace: str) -> str | None:
    """The UID of ``namespace`` (None when it cannot be read)."""
    try:
        return cluster.kube.core.read_namespace(namespace).metadata.uid
    except Exception:  # noqa: BLE001 - no UID only means no reuse: the baseline is measured
        return None


def app_driver(charts_dirs: Sequence[Path] = ()) -> AppsDriver:
    """The driver every episode of the conductor uses, over ``charts_dirs`` then the repository's ``charts/``."""
    return AppsDriver(charts_dirs)
