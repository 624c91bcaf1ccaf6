"""Static checks of a problem against its app's rendered chart (``helm template``, no cluster).

The registry checks (:mod:`sregym.conductor.checks`) accept any name; a misspelled workload, a
container the workload does not have or a field path that reads nothing would only show on the
cluster, often as a fault that never takes effect or, worse, an oracle that passes on nothing (a
``not_contains`` test on a path that does not exist always holds). Here every object a fault or an
oracle names must be in the chart as the app deploys it, each container named must be in that
workload, and each ``object_field`` test must hold on the healthy chart on a path that reads
something there (the whole path, or up to its container where the fault adds the field): the
oracle passes before the fault, on the field it means. Errors point at the file, line and field.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from sregym.apps import load_app
from sregym.apps.spec import charts_root
from sregym.apps.release import image_values
from sregym.cluster.charts import template
from sregym.core.loader import LoadedProblem
from sregym.oracles import MISSING, Condition, lookup, lookup_steps, parse_path

WORKLOAD_KINDS = ("deployment", "statefulset", "daemonset")
_KIND_ALIASES = {"deploy": "deployment", "deployments": "deployment", "sts": "statefulset",
                 "statefulsets": "statefulset", "ds": "daemonset", "daemonsets": "daemonset", "svc": "service",
                 "services": "service", "cm": "configmap", "configmaps": "configmap", "secrets": "secret",
                 "netpol": "networkpolicy", "networkpolicies": "networkpolicy", "pvc": "persistentvolumeclaim"}


def _kind(word: str) -> str:
    word = word.lower()
    return _KIND_ALIASES.get(word, word)


class RenderedChart:
    """The objects of one app's chart, by (kind, name), as ``helm template`` renders them."""

    def __init__(self, docs: list[dict[str, Any]], app: str, namespace: str,
                 declared: Sequence[tuple[str, str]] = ()) -> None:
        self.app, self.namespace = app, namespace
        self.objects = {(_kind(d["kind"]), d["metadata"]["name"]): d for d in docs if d and d.get("kind")}
        # workloads the app's sregym.yaml declares that the chart does not render: an operator makes
        # them at run time (event-pipeline's queue), so only their kind and name can be checked
        self.operated = {(_kind(k), n) for k, n in declared} - set(self.objects)
        # a StatefulSet's pods have stable names, <name>-<ordinal>, that a fault may target (a pod
        # held in Terminating); the chart renders no Pod, so only the name can be checked
        self.operated |= {("pod", f"{name}-{i}") for (k, name), d in self.objects.items() if k == "statefulset"
                          for i in range(int((d.get("spec") or {}).get("replicas", 1) or 0))}

    @classmethod
    def of(cls, app: str, charts_dirs: Sequence[Path] = ()) -> RenderedChart:
        """Extra chart folders first, then the repository's (as the app driver looks them up)."""
        spec = load_app(app, [*map(Path, charts_dirs), charts_root(), charts_root() / "public"])
        rendered = template(spec.chart, spec.namespace, {"images": image_values(spec)})
        declared = [(w.kind, w.name) for w in [*spec.services, *spec.datastores]]
        return cls([d for d in yaml.safe_load_all(rendered) if d], app, spec.namespace, declared)

    def get(self, kind: str | None, name: str) -> dict[str, Any] | None:
        kinds = [_kind(kind)] if kind else WORKLOAD_KINDS
        return next((self.objects[(k, name)] for k in kinds if (k, name) in self.objects), None)

    def names(self, kind: str | None) -> list[str]:
        kinds = [_kind(kind)] if kind else WORKLOAD_KINDS
        return sorted(n for k, n in [*self.objects, *self.operated] if k in kinds)

    def is_operated(self, kind: str | None, name: str) -> bool:
        kinds = [_kind(kind)] if kind else WORKLOAD_KINDS
        return any((k, name) in self.operated for k in kinds)


def _containers(obj: dict[str, Any]) -> list[str]:
    spec = (obj.get("spec") or {}).get("template", {}).get("spec") or obj.get("spec") or {}
    return [c["name"] for c in [*spec.get("containers", []), *spec.get("initContainers", [])]]


def check_against_chart(lp: LoadedProblem, chart: RenderedChart) -> None:
    """Raise ``ProblemFileError`` at the first object, container or field the chart does not have."""
    p, src = lp.problem, lp.source

    def need(loc: tuple, kind: str | None, name: str, container: str | None = None) -> dict[str, Any] | None:
        obj = chart.get(kind, name)
        what = kind or "workload"
        if obj is None and container is None and chart.is_operated(kind, name):
            return None  # made by the app's operator: nothing rendered to check further
        if obj is None:
            known = chart.names(kind)
            raise src.error(loc, f"{p.app.name}'s chart has no {what} {name!r}",
                            hint=f"its {what}s: {', '.join(known) or 'none'}")
        if container is not None and container not in _containers(obj):
            raise src.error((*loc[:-1], "container"), f"{what} {name!r} has no container {container!r}",
                            hint=f"its containers: {', '.join(_containers(obj))}")
        return obj

    for i, fault in enumerate(p.faults):
        t = fault.target
        params = fault.params or {}
        # a custom resource's kind is a parameter (custom_resource_field): the selector knows only built-in kinds
        kind = t.kind or (params["kind"] if isinstance(params.get("kind"), str) else None)
        if t.name and t.kind != "Node" and (t.namespace in (None, chart.namespace)):
            need(("faults", i, "target", "name"), kind, t.name, t.container)
        if isinstance(params.get("workload"), str):
            need(("faults", i, "params", "workload"), None, params["workload"], params.get("container"))
    for j, ref in enumerate(p.oracles.mitigation):
        params, loc = ref.params or {}, ("oracles", "mitigation", j, "params")
        if params.get("namespace") not in (None, chart.namespace):
            continue  # an object outside the app (the load generator's namespace): not in this chart
        for k, name in enumerate(params.get("workloads") or []):
            need((*loc, "workloads", k), None, name)
        if isinstance(params.get("workload"), str):
            need((*loc, "workload"), params.get("kind") if isinstance(params.get("kind"), str) else None,
                 params["workload"])
        if isinstance(params.get("kind"), str) and isinstance(params.get("name"), str):
            obj = need((*loc, "name"), params["kind"], params["name"])
            if obj is not None and isinstance(params.get("field"), str) and isinstance(params.get("expect"), dict):
                _field_holds(src.error, (*loc, "field"), obj, params["field"], Condition.model_validate(params["expect"]))


def _field_holds(error: Any, loc: tuple, obj: dict[str, Any], path: str, expect: Condition) -> None:
    """The test holds on the healthy object, and the path reads a field the object has: all of it
    when the test needs a value, else (a test that also holds on absence, as for a field the fault
    adds: ``not_equals``, ``exists: false``) up to its first list selector, the container."""
    steps = parse_path(path)
    if expect.holds(MISSING)[0]:
        first_match = next((i for i, (kind, _) in enumerate(steps) if kind == "match"), len(steps) - 1)
        steps = steps[:first_match + 1]
    if lookup_steps(obj, steps) is MISSING:
        raise error(loc, f"the field path {path!r} reads nothing in {obj['kind']} {obj['metadata']['name']!r} "
                         "of the chart", hint="check each step against the rendered object (helm template)")
    ok, why = expect.holds(lookup(obj, path))
    if not ok:
        raise error(loc, f"the test on {path!r} fails on the healthy chart ({why}): the oracle would never pass",
                    hint="the expectation must describe the working value the chart deploys")


def check_against_charts(problems: Sequence[LoadedProblem], charts_dirs: Sequence[Path] = ()) -> None:
    """``check_against_chart`` for each problem, each app's chart rendered once."""
    charts: dict[str, RenderedChart] = {}
    for lp in problems:
        app = lp.problem.app.name
        if app not in charts:
            charts[app] = RenderedChart.of(app, charts_dirs)
        check_against_chart(lp, charts[app])
