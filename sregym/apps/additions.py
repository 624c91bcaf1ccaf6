"""What a live release object has that its chart's manifest does not, in the lists and maps a merge
keeps: an entry someone added.

``kubectl diff`` applies the manifest as a server-side dry run and compares the result with the
live object; helm's three-way merge patches the live object from the old and new manifests. Both
merge lists by key (a container's ``env`` by name, a Service's ``ports`` by port) and maps by key
(a ConfigMap's ``data``), so an entry that no manifest ever had survives both: the diff shows
nothing and the upgrade keeps it (measured by the anti-gaming matrix: an ``env`` entry the chart
never had outlived every later deploy). An agent that adds one changes what the next episode (or
the next cell of a suite) starts from. :func:`additions` finds them and says how to remove each
(JSON patch operations, each guarded by a ``test`` of what it removes).

Pure functions on Kubernetes objects as JSON.
"""

from __future__ import annotations

from typing import Any

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}
POD_TEMPLATE = ("spec", "template", "spec")
# a container's lists the merge keys: (field, the key of an entry)
CONTAINER_LISTS = (("env", "name"), ("envFrom", None), ("volumeMounts", "mountPath"))


def _at(obj: dict, path: tuple[str, ...]) -> Any:
    for part in path:
        obj = (obj or {}).get(part)
    return obj


def _pointer(*parts: object) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _removals(live: list[dict], want: list[dict], key: str | None, path: tuple[object, ...], what: str,
              where: str) -> list[tuple[str, list[dict]]]:
    """An entry of ``live`` whose key (the whole entry when ``key`` is None) no entry of ``want`` has."""
    keep = [e.get(key) if key else e for e in want or []]
    out = []
    for i, entry in reversed(list(enumerate(live or []))):  # from the end: each removal keeps the earlier indices
        name = entry.get(key) if key else entry
        if name not in keep:
            test = {"op": "test", "path": _pointer(*path, i, key) if key else _pointer(*path, i), "value": name}
            label = name if key else ", ".join(f"{k}={v}" for k, v in sorted(entry.items()))
            out.append((f"{where}: {what} {label}", [test, {"op": "remove", "path": _pointer(*path, i)}]))
    return out


def additions(manifest: dict[str, Any], live: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(what was added, the JSON patch removing it) for each entry ``live`` has that ``manifest``
    (the same object as the chart renders it) has not: in a workload's pod template, containers,
    init containers, volumes, and each container's ``env``, ``envFrom`` and ``volumeMounts``; a
    Service's ports; a ConfigMap's or Secret's keys."""
    kind = manifest.get("kind", "")
    where = f"{kind}/{(manifest.get('metadata') or {}).get('name', '')}"
    out: list[tuple[str, list[dict]]] = []
    if kind in WORKLOADS:
        want, have = _at(manifest, POD_TEMPLATE) or {}, _at(live, POD_TEMPLATE) or {}
        out += _removals(have.get("volumes"), want.get("volumes"), "name", (*POD_TEMPLATE, "volumes"), "volume", where)
        for field in ("initContainers", "containers"):
            wanted = {c.get("name"): c for c in want.get(field) or []}
            for i, container in reversed(list(enumerate(have.get(field) or []))):
                mine = wanted.get(container.get("name"))
                base = (*POD_TEMPLATE, field, i)
                if mine is None:
                    out.append((f"{where}: {field[:-1]} {container.get('name')}",
                                [{"op": "test", "path": _pointer(*base, "name"), "value": container.get("name")},
                                 {"op": "remove", "path": _pointer(*base)}]))
                    continue
                for lst, key in CONTAINER_LISTS:
                    out += _removals(container.get(lst), mine.get(lst), key, (*base, lst),
                                     f"{lst} of container {container.get('name')}:", where)
    elif kind == "Service":
        def port(p: dict) -> tuple:
            return p.get("port"), p.get("protocol") or "TCP"
        want_ports = {port(p) for p in _at(manifest, ("spec", "ports")) or []}
        for i, p in reversed(list(enumerate(_at(live, ("spec", "ports")) or []))):
            if port(p) not in want_ports:
                out.append((f"{where}: port {p.get('port')}/{p.get('protocol') or 'TCP'}",
                            [{"op": "test", "path": _pointer("spec", "ports", i, "port"), "value": p.get("port")},
                             {"op": "remove", "path": _pointer("spec", "ports", i)}]))
    elif kind in ("ConfigMap", "Secret"):
        want_keys = set(manifest.get("data") or {}) | set(manifest.get("binaryData") or {}) \
            | set(manifest.get("stringData") or {})
        for field in ("data", "binaryData"):
            for key in sorted(live.get(field) or {}):
                if key not in want_keys:
                    out.append((f"{where}: key {key}", [{"op": "remove", "path": _pointer(field, key)}]))
    return out


# Fields of which an object holds exactly one member: a probe's or a lifecycle hook's handler, a
# volume's source. A merge adds the chart's member beside the one someone wrote, and the API refuses
# the result ("may not specify more than 1 handler type"), so the upgrade itself fails.
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc", "sleep")
PROBES = ("readinessProbe", "livenessProbe", "startupProbe")


def _members(obj: dict | None, names: tuple[str, ...] | None) -> set[str]:
    if not isinstance(obj, dict):
        return set()
    return {k for k in obj if k in names} if names else {k for k in obj if k != "name"}


def union_conflicts(manifest: dict[str, Any], live: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(what, the JSON patch putting back the manifest's whole field) for each one-member field of a
    workload's pod template whose live member is another than the manifest's: a probe or lifecycle
    hook that checks another way (a readiness ``httpGet`` made a ``tcpSocket``), a volume of another
    source. Applied before the upgrade, which would otherwise fail on the merged object."""
    kind = manifest.get("kind", "")
    if kind not in WORKLOADS:
        return []
    where = f"{kind}/{(manifest.get('metadata') or {}).get('name', '')}"
    want, have = _at(manifest, POD_TEMPLATE) or {}, _at(live, POD_TEMPLATE) or {}
    out: list[tuple[str, list[dict]]] = []

    def replace(path: tuple, old: Any, new: Any, what: str) -> None:
        out.append((f"{where}: {what}", [{"op": "test", "path": _pointer(*path), "value": old},
                                         {"op": "replace", "path": _pointer(*path), "value": new}]))

    wanted_volumes = {v.get("name"): v for v in want.get("volumes") or []}
    for i, v in enumerate(have.get("volumes") or []):
        mine = wanted_volumes.get(v.get("name"))
        if mine is not None and _members(v, None) != _members(mine, None):
            replace((*POD_TEMPLATE, "volumes", i), v, mine, f"volume {v.get('name')} of another source")
    for field in ("initContainers", "containers"):
        wanted = {c.get("name"): c for c in want.get(field) or []}
        for i, c in enumerate(have.get(field) or []):
            mine = wanted.get(c.get("name"))
            if mine is None:
                continue
            base = (*POD_TEMPLATE, field, i)
            for probe in PROBES:
                if mine.get(probe) and c.get(probe) and _members(c[probe], HANDLERS) != _members(mine[probe], HANDLERS):
                    replace((*base, probe), c[probe], mine[probe], f"{probe} of container {c.get('name')} checks another way")
            for hook in ("postStart", "preStop"):
                old, new = _at(c, ("lifecycle", hook)), _at(mine, ("lifecycle", hook))
                if old and new and _members(old, HANDLERS) != _members(new, HANDLERS):
                    replace((*base, "lifecycle", hook), old, new, f"{hook} hook of container {c.get('name')} acts another way")
    return out
