"""The fault-primitive kit: everything a primitive under ``injectors/`` (or a third-party package)
is written with. Modules with a leading underscore are the engine's; import from here.

A primitive subclasses :class:`Injector` (or :class:`ObjectEdit` / :class:`WorkloadEdit` for an
edit of Kubernetes objects, :class:`PodNetworkFault` for rules in a pod's network namespace),
declares ``Params`` (and optionally ``State``, a :class:`PlannedState`) and registers with
``@injector("name")``. See docs/adding-a-problem.md and docs/injectors.md.
"""

from sregym.cluster.nodeagent import (
    NodeRunner,
    container_processes,
    install_file,
    kill_spawned,
    pids_with_cmdline,
    process_starttime,
    spawn,
)
from sregym.core.constants import HIDDEN_NAMESPACE, LOADGEN_NAMESPACE, LOADGEN_TARGET_LABEL, OWNER_LABEL, OWNER_VALUE
from sregym.core.errors import FaultError, MechanismUnavailable, UserInputError
from sregym.core.problem import Selector
from sregym.injectors import _delayq as delayq  # node-side programs, shipped to nodes by their file
from sregym.injectors import _dust as dust
from sregym.injectors import _sectorfs as sectorfs
from sregym.injectors._api import (
    INJECTORS,
    KUBERNETES_API,
    FaultContext,
    Injector,
    Mechanism,
    NoParams,
    PlannedState,
    Verification,
    injector,
    run_labels,
)
from sregym.injectors._edits import EditState, ObjectEdit, WorkloadEdit, WorkloadEditState
from sregym.injectors._netns import (
    DEFAULT_DEV,
    NOT_LOOPBACK,
    NetnsState,
    PodNetworkFault,
    chain_name,
    chain_script,
    clear_root_script,
    random_drop_rules,
    root_qdisc_script,
    tbf_script,
    unchain_script,
)
from sregym.injectors._node import (
    TargetContainer,
    live_container_id,
    node_program,
    node_runner,
    pick_container,
    running_pods,
    target_pid,
)
from sregym.injectors._noise import NoiseParams, candidates, choose, running, token
from sregym.injectors._objects import (
    ABSENT,
    EDIT_MANAGER,
    RESTART_ANNOTATION,
    apply_edits,
    container_index,
    create_object,
    delete_object,
    dig,
    edit,
    find_workload,
    get_object,
    list_objects,
    namespace_of,
    pods_of,
    poll,
    require_object,
    resource,
    restart_edits,
    restart_path,
)
from sregym.injectors._observe import ready, restarts, running_with, terminated_reasons, unschedulable, waiting_reasons
from sregym.injectors._stress import WORK_DIR, cgroup_files, cpu_ticks, start_in_cgroups, stress_argv
from sregym.injectors._support import mechanism_support

__all__ = [
    # writing and registering a primitive
    "INJECTORS", "KUBERNETES_API", "FaultContext", "Injector", "Mechanism", "NoParams", "PlannedState",
    "Verification", "injector", "run_labels",
    # errors and targets
    "FaultError", "MechanismUnavailable", "UserInputError", "Selector",
    "HIDDEN_NAMESPACE", "LOADGEN_NAMESPACE", "LOADGEN_TARGET_LABEL", "OWNER_LABEL", "OWNER_VALUE",
    # editing Kubernetes objects (recorded before/after, restored by recover)
    "ObjectEdit", "WorkloadEdit", "EditState", "WorkloadEditState", "ABSENT", "EDIT_MANAGER", "RESTART_ANNOTATION", "apply_edits",
    "container_index", "create_object",
    "delete_object", "dig", "edit", "find_workload", "get_object", "list_objects", "namespace_of", "pods_of", "poll",
    "require_object", "resource", "restart_edits", "restart_path",
    # observing pods
    "ready", "restarts", "running_with", "terminated_reasons", "unschedulable", "waiting_reasons",
    # node-level faults: the target container, its node, processes there
    "TargetContainer", "live_container_id", "node_program", "node_runner", "pick_container", "running_pods", "target_pid",
    "NodeRunner", "container_processes", "install_file", "kill_spawned", "pids_with_cmdline", "process_starttime",
    "spawn", "WORK_DIR", "cgroup_files", "cpu_ticks", "start_in_cgroups", "stress_argv",
    # a pod's network namespace
    "DEFAULT_DEV", "NOT_LOOPBACK", "PodNetworkFault", "NetnsState", "chain_name", "chain_script",
    "clear_root_script", "random_drop_rules", "root_qdisc_script", "tbf_script", "unchain_script",
    # noise
    "NoiseParams", "candidates", "choose", "running", "token",
    # node-side programs and what each node supports
    "delayq", "dust", "sectorfs", "mechanism_support",
]
