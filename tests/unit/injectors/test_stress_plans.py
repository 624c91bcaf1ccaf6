"""What resource_stress runs: the command line and the cgroups it joins (pure logic)."""

from __future__ import annotations

import pytest

from injectors.resource_stress import pod_level
from sregym.core.errors import MechanismUnavailable
from sregym.injectors._stress import stress_argv

UID = "ff1c4191-8b1b-4b16-aca0-cc3a914699d5"


def test_memory_workers_hold_their_memory_and_can_keep_the_nodes_oom_score():
    argv = stress_argv("memory", 1, 100, "92M", None, "tok", keep_oom_score=True)
    assert argv[argv.index("--vm-bytes") + 1] == "92M"
    assert argv[argv.index("--vm-hang") + 1] == "0"  # hold the memory, do not spin a CPU over it
    assert "--no-oom-adjust" in argv
    assert "--no-oom-adjust" not in stress_argv("memory", 1, 100, "92M", None, "tok")


@pytest.mark.parametrize("container_file, pod_file", [
    (f"/sys/fs/cgroup/memory/kubepods/burstable/pod{UID}/24a5875901c8/cgroup.procs",
     f"/sys/fs/cgroup/memory/kubepods/burstable/pod{UID}/cgroup.procs"),
    (f"/host/sys/fs/cgroup/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/cri-containerd-24a5.scope/cgroup.procs",
     f"/host/sys/fs/cgroup/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/cgroup.procs"),
])
def test_the_pod_cgroup_is_the_parent_of_the_containers(container_file, pod_file):
    assert pod_level(container_file, UID) == pod_file


def test_a_cgroup_with_no_pod_above_it_is_refused():
    with pytest.raises(MechanismUnavailable, match="no pod-level cgroup"):
        pod_level("/sys/fs/cgroup/memory/system.slice/containerd.service/cgroup.procs", UID)
