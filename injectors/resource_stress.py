"""CPU, memory or IO pressure from stress-ng inside the target container's cgroups."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sregym.injectors import (WORK_DIR, Injector, Mechanism, MechanismUnavailable, PlannedState, TargetContainer,
                              Verification, cgroup_files, cpu_ticks, injector, kill_spawned, node_runner,
                              pick_container, pids_with_cmdline, poll, start_in_cgroups, stress_argv, target_pid)

IN_CGROUP = Mechanism("stress-ng-in-cgroup", "stress-ng on the node, moved into the target container's cgroups "
                      "(it competes for the container's own CPU quota, memory limit and IO)", ("stress_ng",))
ON_NODE = Mechanism("stress-ng-on-node", "stress-ng as a node-level process next to the target (a noisy "
                    "neighbour competing for the node's CPU, memory and disk)", ("stress_ng",))


class StressParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    resource: Literal["cpu", "memory", "io"] = "cpu"
    workers: int = Field(1, ge=1, le=64)
    load: int = Field(100, ge=1, le=100, description="cpu: percent load per worker")
    memory: str = Field("256M", description="memory: bytes per worker; io: bytes written per worker")
    seconds: float | None = Field(None, gt=0, description="stop by itself after this long (default: until recovered)")
    cgroup: Literal["container", "pod"] = Field(
        "container", description="stress-ng-in-cgroup: join the target container's cgroups, or its pod's (the "
                                 "pod's limits; the pressure then outlives restarts of the container)")
    oom_first: bool = Field(
        True, description="stress-ng makes its workers the OOM killer's first pick (they respawn); false keeps the "
                          "node's default score, so the app (whose score the kubelet raises) is killed instead")


class StressState(PlannedState):
    container: dict[str, Any] = Field(default_factory=dict, description="the target (``TargetContainer``)")
    token: str = Field("", description="names the stressor's processes")
    cgroups: list[str] = Field(default_factory=list, description="cgroups the stressor joins (pod or none)")


@injector("resource_stress")
class ResourceStress(Injector[StressParams]):
    """Put CPU, memory or IO pressure on the target (inside its cgroups, or beside it on its node)."""

    Params = StressParams
    State = StressState
    mechanisms = (IN_CGROUP, ON_NODE)
    targets = ("Pod", "Deployment", "StatefulSet", "DaemonSet")
    node_level = True

    def dies_with_pod(self) -> bool:
        """In the target's cgroups the kubelet kills it with the pod; beside it on the node it stays."""
        return self.mechanism.name == IN_CGROUP.name

    def dies_with_container(self) -> bool:
        """In the container's own cgroup it goes when the container restarts (the pod's outlives it)."""
        return self.mechanism.name == IN_CGROUP.name and self.params.cgroup == "container"

    def plan(self) -> StressState:
        tc = pick_container(self.ctx, self.target)
        runner, pid = target_pid(self.ctx, tc)
        token = "s" + hashlib.sha256(f"{tc.container_id}:{self.ctx.seed}:{self.mechanism.name}".encode()).hexdigest()[:12]
        cgroups = cgroup_files(runner, pid) if self.mechanism.name == IN_CGROUP.name else []
        if self.params.cgroup == "pod":
            cgroups = [pod_level(f, tc.pod_uid) for f in cgroups]
        return StressState(container=tc.as_state(), token=token, cgroups=cgroups)

    def inject(self, state: StressState) -> None:
        runner = node_runner(self.ctx, state.container["node"])
        if pids_with_cmdline(runner, state.token):
            return
        p = self.params
        argv = stress_argv(p.resource, p.workers, p.load, p.memory, p.seconds, state.token,
                           keep_oom_score=not p.oom_first)
        start_in_cgroups(runner, argv, state.cgroups, f"{WORK_DIR}/{state.token}.log")
        poll(lambda: pids_with_cmdline(runner, state.token), 10, 0.2)

    def verify(self, state: StressState) -> Verification:
        runner = node_runner(self.ctx, state.container["node"])
        procs = pids_with_cmdline(runner, state.token)
        if not procs:
            return Verification(False, "stress-ng is not running")
        tc = TargetContainer.from_state(state.container)
        marks = uid_forms(tc.pod_uid) if self.params.cgroup == "pod" else (tc.container_id.split("://")[-1],)
        inside = [pid for pid, _ in procs
                  if any(m in runner.run(["cat", f"/proc/{pid}/cgroup"], check=False).stdout for m in marks)]
        before = cpu_ticks(runner, state.token)
        time.sleep(1)
        burned = cpu_ticks(runner, state.token) - before
        placed = bool(inside) if self.mechanism.name == IN_CGROUP.name else True
        busy = burned > 0 or self.params.resource != "cpu"
        return Verification(placed and busy, f"{len(procs)} stress-ng processes, {len(inside)} in the target's "
                            f"cgroups, {burned} CPU ticks in 1s")

    def recover(self, state: StressState) -> None:
        runner = node_runner(self.ctx, state.container["node"])
        for pid, start in pids_with_cmdline(runner, state.token):
            kill_spawned(runner, pid, start)
        runner.run(["rm", "-rf", f"{WORK_DIR}/{state.token}"], check=False)


def uid_forms(pod_uid: str) -> tuple[str, str]:
    """How a pod's uid appears in cgroup paths (cgroupfs driver; systemd driver with underscores)."""
    return pod_uid, pod_uid.replace("-", "_")


def pod_level(procs_file: str, pod_uid: str) -> str:
    """The pod's ``cgroup.procs`` for one of its container's (the container's cgroup is a child of the pod's)."""
    pod_dir = Path(procs_file).parent.parent
    if not any(form in pod_dir.name for form in uid_forms(pod_uid)):
        raise MechanismUnavailable(f"resource_stress: no pod-level cgroup above {procs_file}",
                                   hint="use cgroup: container on this node")
    return str(pod_dir / "cgroup.procs")
