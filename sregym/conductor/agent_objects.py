"""Teardown of what the agent made: the app namespace after the agent phase, minus what was there
before it and what the app's release owns, is the agent's; it is recorded and removed.

The kinds looked at are the ones the agent's RBAC lets it create (read from the rules it was
given, not from a list kept here), so a wider grant is covered without an edit. The agent cannot
create pods, replica sets or events itself; those made by controllers for its workloads die with
them (deletion cascades). An agent-made object is recognised by its uid, never by its labels or
field managers: the agent could copy those. Release objects it changed are reported as drifted:
the next deploy puts them back (``sregym.apps.lifecycle.deploy`` diffs a reused release).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sregym.apps.release import drifted, release_objects
from sregym.cluster.handle import ClusterHandle
from sregym.core.record import AgentObject

DELETE_TIMEOUT_S = 120


def creatable_resources(rules: list[dict[str, Any]]) -> list[str]:
    """``plural.group`` (core: ``plural``) of every resource a Role's ``rules`` allow to create."""
    out = set()
    for rule in rules:
        verbs = set(rule.get("verbs") or [])
        if not verbs & {"create", "*"}:
            continue
        for group in rule.get("apiGroups") or [""]:
            for res in rule.get("resources") or []:
                if "/" not in res and res != "*":  # subresources (pods/exec...) are not objects
                    out.add(f"{res}.{group}" if group else res)
    return sorted(out)


def agent_creatable() -> list[str]:
    """What the agent's namespace Role lets it create (``sregym.cluster.agent_access``)."""
    from sregym.cluster.agent_access import app_namespace_rules

    return creatable_resources(app_namespace_rules())


def agent_may_create_namespaces() -> bool:
    """Whether the agent's cluster-wide grant lets it create namespaces (today it does not)."""
    from sregym.cluster.agent_access import cluster_rules

    return "namespaces" in creatable_resources(cluster_rules())


def namespaces(cluster: ClusterHandle) -> dict[str, str]:
    """name -> uid of every namespace."""
    return {n.metadata.name: n.metadata.uid for n in cluster.kube.core.list_namespace().items}


@dataclass
class Snapshot:
    """The uids and versions of the creatable objects of one namespace at one moment."""

    namespace: str
    resources: list[str]
    objects: dict[tuple[str, str], tuple[str, str, str]] = field(default_factory=dict)  # (res, name) -> (uid, rv, kind)
    namespaces: dict[str, str] | None = None  # name -> uid, when the agent may create namespaces


def snapshot(cluster: ClusterHandle, namespace: str, resources: list[str] | None = None) -> Snapshot:
    """Every object of the agent-creatable kinds in ``namespace`` now."""
    snap = Snapshot(namespace, resources if resources is not None else agent_creatable())
    if agent_may_create_namespaces():
        snap.namespaces = namespaces(cluster)
    for res in snap.resources:
        proc = cluster.kube.kubectl("get", res, "-n", namespace, "-o", "json", check=False, timeout=60)
        if proc.returncode != 0:
            continue  # not served by this cluster (e.g. an API group it lacks)
        for item in json.loads(proc.stdout).get("items", []):
            meta = item["metadata"]
            snap.objects[(res, meta["name"])] = (meta["uid"], meta.get("resourceVersion", ""), item.get("kind", ""))
    return snap


def changes(before: Snapshot, after: Snapshot, owned: set[tuple[str, str]]) -> list[AgentObject]:
    """Objects new since ``before`` (by uid) or changed (by resource version) and not the release's."""
    out = []
    known_uids = {uid for uid, _, _ in before.objects.values()}
    for (res, name), (uid, rv, kind) in sorted(after.objects.items()):
        if (kind, name) in owned:
            continue
        if uid not in known_uids:
            out.append(AgentObject(resource=res, namespace=after.namespace, name=name, change="created"))
        elif before.objects.get((res, name), ("", rv, kind))[1] != rv:
            out.append(AgentObject(resource=res, namespace=after.namespace, name=name, change="changed"))
    return out


def remove(cluster: ClusterHandle, objects: list[AgentObject]) -> None:
    """Delete each created object (cascading to what controllers made for it); note the outcome on it."""
    for obj in objects:
        if obj.change != "created":
            continue
        where = ["-n", obj.namespace] if obj.namespace else []
        proc = cluster.kube.kubectl("delete", f"{obj.resource}/{obj.name}", *where, "--ignore-not-found",
                                    "--wait=true", f"--timeout={DELETE_TIMEOUT_S}s", check=False,
                                    timeout=DELETE_TIMEOUT_S + 30)
        obj.removed = proc.returncode == 0
        obj.error = None if obj.removed else (proc.stderr.strip() or proc.stdout.strip())[-300:]


def teardown(cluster: ClusterHandle, before: Snapshot, release: str) -> list[AgentObject]:
    """What the agent made or changed in ``before.namespace`` since ``before``: created objects are
    deleted, release objects that drifted are listed (the next deploy resets them)."""
    after = snapshot(cluster, before.namespace, before.resources)
    owned = release_objects(cluster, release, before.namespace) or set()
    found = changes(before, after, owned)
    if before.namespaces is not None:  # a whole namespace it made goes, with everything in it
        found += [AgentObject(resource="namespaces", namespace="", name=name, change="created")
                  for name, uid in sorted(namespaces(cluster).items()) if uid not in before.namespaces.values()]
    remove(cluster, found)
    found += [AgentObject(resource="(release)", namespace=before.namespace, name=name, change="drifted")
              for name in drifted(cluster, release, before.namespace)]
    return found
