"""Teardown of what the agent made: the app namespace after the agent phase, minus what was there
before it and what the app's release owns, is the agent's; it is recorded and removed.

The kinds looked at are the ones the agent's RBAC lets it create (read from the rules it was
given, not from a list kept here), so a wider grant is covered without an edit. The agent cannot
create pods, replica sets or events itself; those made by controllers for its workloads die with
them (deletion cascades). An agent-made object is recognised by its uid, never by its labels or
field managers: the agent could copy those. Release objects it changed are reported as drifted:
the next deploy puts them back (``sregym.apps.lifecycle.deploy`` diffs a reused release).

The snapshot taken before the agent starts is also written to the run journal (``to_dict``), so
``sregym cleanup`` can tear down what the agent made when the conductor was killed mid-run.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sregym.apps.release import drifted, manifest, release_objects
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


def namespace_uid(cluster: ClusterHandle, namespace: str) -> str | None:
    """The uid of ``namespace``, None when it does not exist (or cannot be read)."""
    found = cluster.kube.get_json(f"/api/v1/namespaces/{namespace}")
    return ((found or {}).get("metadata") or {}).get("uid")


SNAPSHOT_WORKERS = 8
SNAPSHOT_FORMAT = 1  # bump when the journaled form changes; ``from_dict`` refuses another


@dataclass
class Snapshot:
    """The uids and versions of the creatable objects of one namespace at one moment."""

    namespace: str
    resources: list[str]
    objects: dict[tuple[str, str], tuple[str, str, str]] = field(default_factory=dict)  # (res, name) -> (uid, rv, kind)
    namespaces: dict[str, str] | None = None  # name -> uid, when the agent may create namespaces
    namespace_uid: str | None = None  # the namespace itself: a recreated one holds none of these objects

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe and compact (one ``[resource, name, uid, resourceVersion, kind]`` row per object)."""
        out: dict[str, Any] = {"v": SNAPSHOT_FORMAT, "namespace": self.namespace, "resources": self.resources,
                               "objects": [[res, name, *rest] for (res, name), rest in sorted(self.objects.items())]}
        if self.namespace_uid is not None:
            out["namespace_uid"] = self.namespace_uid
        if self.namespaces is not None:
            out["namespaces"] = self.namespaces
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        """The snapshot ``to_dict`` wrote; ValueError for another format or a malformed one."""
        if data.get("v") != SNAPSHOT_FORMAT:
            raise ValueError(f"snapshot format {data.get('v')!r}, this sregym reads format {SNAPSHOT_FORMAT}")
        try:
            return cls(namespace=data["namespace"], resources=list(data["resources"]),
                       objects={(res, name): (uid, rv, kind) for res, name, uid, rv, kind in data["objects"]},
                       namespaces=data.get("namespaces"), namespace_uid=data.get("namespace_uid"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed snapshot: {e!r}") from None


def snapshot(cluster: ClusterHandle, namespace: str, resources: list[str] | None = None) -> Snapshot:
    """Every object of the agent-creatable kinds in ``namespace`` now."""
    snap = Snapshot(namespace, resources if resources is not None else agent_creatable())
    snap.namespace_uid = namespace_uid(cluster, namespace)
    if agent_may_create_namespaces():
        snap.namespaces = namespaces(cluster)

    def listed(res: str) -> tuple[str, dict[str, Any] | None]:
        plural, _, group = res.partition(".")
        version = cluster.kube.preferred_version(group)
        return res, cluster.kube.list_json(version, plural, namespace) if version else None

    # one GET per kind through the API client (a kind this cluster does not serve lists as None),
    # several at once: a kubectl process per kind was a second or two of every episode's start and
    # end on 2 busy cores
    with ThreadPoolExecutor(max_workers=SNAPSHOT_WORKERS) as pool:
        listings = list(pool.map(listed, snap.resources))
    for res, listing in listings:
        if listing is None:
            continue
        kind = str(listing.get("kind", "")).removesuffix("List")  # the API's list items carry no kind
        for item in listing.get("items") or []:
            meta = item["metadata"]
            snap.objects[(res, meta["name"])] = (meta["uid"], meta.get("resourceVersion", ""), item.get("kind", kind))
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
    """Delete each created object and wait until what controllers made for it is gone too (a
    Deployment's pods outlive a background delete by their grace period, still running the agent's
    code after the run said it removed them); note the outcome on it."""
    for obj in objects:
        if obj.change != "created":
            continue
        where = ["-n", obj.namespace] if obj.namespace else []
        proc = cluster.kube.kubectl("delete", f"{obj.resource}/{obj.name}", *where, "--ignore-not-found",
                                    "--cascade=foreground", "--wait=true", f"--timeout={DELETE_TIMEOUT_S}s", check=False,
                                    timeout=DELETE_TIMEOUT_S + 30)
        obj.removed = proc.returncode == 0
        obj.error = None if obj.removed else (proc.stderr.strip() or proc.stdout.strip())[-300:]


def teardown(cluster: ClusterHandle, before: Snapshot, release: str) -> list[AgentObject]:
    """What the agent made or changed in ``before.namespace`` since ``before``: created objects are
    deleted, release objects that drifted are listed (the next deploy resets them). Nothing when the
    namespace was deleted and made anew since: what the agent made went with the old one, and every
    object of the new one would look new (``sregym cleanup`` may come long after the run)."""
    if before.namespace_uid is not None and namespace_uid(cluster, before.namespace) != before.namespace_uid:
        return []
    after = snapshot(cluster, before.namespace, before.resources)
    text = manifest(cluster, release, before.namespace)  # read once: what the release owns, and its drift
    owned = (release_objects(cluster, release, before.namespace, text=text) if text is not None else None) or set()
    found = changes(before, after, owned)
    if before.namespaces is not None:  # a whole namespace it made goes, with everything in it
        found += [AgentObject(resource="namespaces", namespace="", name=name, change="created")
                  for name, uid in sorted(namespaces(cluster).items()) if uid not in before.namespaces.values()]
    remove(cluster, found)
    drift = drifted(cluster, release, before.namespace, text=text) if text is not None else ["(unknown)"]
    found += [AgentObject(resource="(release)", namespace=before.namespace, name=name, change="drifted")
              for name in drift]
    return found
