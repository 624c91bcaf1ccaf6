"""Helpers of node-level primitives: pick the target container (seeded), reach its node, find its PID."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sregym.cluster.nodeagent import NodeRunner, container_pid, runner_for
from sregym.core.errors import FaultError, UserInputError
from sregym.core.problem import Selector
from sregym.injectors._objects import find_workload, get_object, list_objects, namespace_of, pods_of

if TYPE_CHECKING:
    from sregym.injectors._api import FaultContext


@dataclass(frozen=True)
class TargetContainer:
    """One running container a node-level fault acts on (all plain data: it is journaled)."""

    namespace: str
    pod: str
    pod_uid: str
    node: str
    container: str
    container_id: str
    pod_ip: str = ""

    def as_state(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TargetContainer:
        return cls(**state)


def running_pods(ctx: Any, target: Selector, where: str = "target") -> list[dict]:
    """Running pods the selector names: a Pod by name, a workload's pods, or pods by labels."""
    ns = namespace_of(ctx, target)
    if target.kind == "Pod" and target.name:
        pod = get_object(ctx.kube, "Pod", target.name, ns)
        pods = [pod] if pod else []
    elif target.kind in (None, "Deployment", "StatefulSet", "DaemonSet") and target.name:
        _, workload = find_workload(ctx.kube, ns, target, where)
        pods = pods_of(ctx.kube, workload)
    elif target.labels:
        pods = list_objects(ctx.kube, "Pod", ns, target.labels)
    else:
        raise UserInputError(f"{where}: name a Pod or workload, or give labels")
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp")]
    only = ctx.only_pods
    if only is not None:  # a re-application: the new pods of the target, not those already faulted
        running = [p for p in running if p["metadata"]["uid"] in only]
    if not running:
        raise UserInputError(f"{where}: no running pod in namespace {ns} matches {target.describe()}")
    return sorted(running, key=lambda p: p["metadata"]["name"])


def pick_container(ctx: Any, target: Selector, purpose: str = "pod", where: str = "target") -> TargetContainer:
    """One running container of the target; which pod is a seeded choice (same seed, same pod)."""
    pod = random.Random(f"{ctx.seed}:{purpose}").choice(running_pods(ctx, target, where))
    statuses = {s["name"]: s for s in pod["status"].get("containerStatuses") or []}
    name = target.container or pod["spec"]["containers"][0]["name"]
    if name not in statuses or not statuses[name].get("containerID"):
        raise UserInputError(f"{where}.container: pod {pod['metadata']['name']} has no running container {name!r}")
    return TargetContainer(pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"],
                           pod["spec"]["nodeName"], name, statuses[name]["containerID"],
                           pod["status"].get("podIP") or "")


def node_runner(ctx: FaultContext, node: str) -> NodeRunner:
    """How to run commands on ``node``: ``ctx.node_runner(node)`` if the conductor gave one, else
    this host (local provider) or the node pod in the hidden namespace."""
    return ctx.node_runner(node) if ctx.node_runner else runner_for(ctx.kube, node, ctx.hidden_namespace)


def live_container_id(ctx: Any, tc: TargetContainer) -> str | None:
    """The container's current id (None if the pod is gone or was replaced)."""
    pod = get_object(ctx.kube, "Pod", tc.pod, tc.namespace)
    if not pod or pod["metadata"]["uid"] != tc.pod_uid:
        return None
    for s in pod["status"].get("containerStatuses") or []:
        if s["name"] == tc.container:
            return s.get("containerID")
    return None


def target_pid(ctx: Any, tc: TargetContainer) -> tuple[NodeRunner, int]:
    """The runner of the container's node and its init PID there."""
    cid = live_container_id(ctx, tc)
    if not cid:
        raise FaultError(f"pod {tc.namespace}/{tc.pod} container {tc.container} no longer runs")
    runner = node_runner(ctx, tc.node)
    return runner, container_pid(runner, cid)


def node_program(module: ModuleType) -> tuple[str, str]:
    """A node-side program of the kit (``delayq``, ``sectorfs``): the file name it is installed
    under on a node (its public name, as runs before the kit's modules went private installed it,
    so a journaled run's process is still found by its command line) and its source."""
    path = Path(module.__file__ or "")
    return path.name.removeprefix("_"), path.read_text()
