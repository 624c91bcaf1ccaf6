"""Primitives with a typed planned state read the state journals already hold, and write it back
as the same JSON (so a run's journal and `sregym cleanup` agree across versions)."""

from __future__ import annotations

import json

import pytest

from sregym.injectors import INJECTORS, FaultContext, PlannedState

# the planned state of each typed primitive as journals written before it had a State model hold it
TC = {"namespace": "app", "pod": "web-5d9c-x1", "pod_uid": "0b7e-uid", "node": "n1", "container": "web",
      "container_id": "containerd://abc", "pod_ip": "10.0.0.5"}
EDIT = {"kind": "Deployment", "namespace": "app", "name": "web", "path": ["spec", "replicas"], "before": 1, "after": 0}
WORKLOAD = {"edits": [EDIT], "workload": ["Deployment", "app", "web"], "container": "web"}
NETNS = {"container": TC, "pid": 4242, "pid_start": "123456", "netns": "net:[4026532]", "chain": "SG-1a2b3c",
         "hooks": ["OUTPUT"], "rules": ["-d 10.0.0.9 -j DROP"]}
OLD_STATES = {
    "pod_kill": {"pods": [["app", "web-5d9c-x1", "0b7e-uid"], ["app", "web-5d9c-x2", "1c8f-uid"]]},
    **{name: WORKLOAD for name in ("container_args", "container_port", "env_var", "image_tag", "load_surge",
                                   "probe_misconfig", "replicas_zero", "resource_limits")},
    "pvc_problem": {**WORKLOAD, "claim": None},
    "rbac_revoke": {**WORKLOAD, "service_account": "web"},
    "unschedulable": {**WORKLOAD, "pods": ["web-5d9c-x1"]},
    "resource_quota": {"edits": [], "manifest": {"kind": "ResourceQuota", "metadata": {"name": "q"}},
                       "pods": ["web-5d9c-x1"], "workload": ["Deployment", "app", "web"]},
    "admission_webhook": {"edits": [], "workload": ["Deployment", "app", "web"], "container": "web", "namespace": "app",
                          "manifests": [{"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "pod-policy.app"}}],
                          "pods": ["web-5d9c-x1"]},
    "apf_throttle": {"edits": [], "workload": ["Deployment", "app", "web"], "service_account": "web",
                     "manifests": [{"kind": "PriorityLevelConfiguration", "metadata": {"name": "batch"}},
                                   {"kind": "FlowSchema", "metadata": {"name": "batch"}}]},
    "config_value": {"edits": [EDIT], "planned_at": "2026-11-01T10:00:00Z"},
    "custom_resource_field": {"edits": [{**EDIT, "kind": "QueueCluster", "api_version": "pipeline.sregym.io/v1"}],
                              "api_version": "pipeline.sregym.io/v1"},
    "service_misconfig": {"edits": [EDIT], "port_index": 0},
    "stuck_finalizer": {"kind": "StatefulSet", "namespace": "app", "name": "queue", "uid": "u1",
                        "finalizer": "example.com/drain", "controller": "QueueCluster/queue"},
    "dns_failure": NETNS,
    "packet_loss": {**NETNS, "hooks": ["OUTPUT", "INPUT"]},
    "bandwidth_limit": {k: v for k, v in NETNS.items() if k not in ("hooks", "rules")}
    | {"qdisc_before": "qdisc noqueue 0: root"},
    "network_latency": {**NETNS, "queue": 17},
    "network_partition": {**NETNS, "peer_ips": ["10.0.0.9"], "peer_port": 5432},
    "network_policy_deny": {**NETNS, "policy": {"kind": "NetworkPolicy", "metadata": {"name": "deny"}},
                            "probe": ["10.96.0.10", 5432]},
    "credential_rotation": {"namespace": "app", "pod": "db-0", "pod_uid": "u1", "container": "db", "old": "a",
                            "new": "b", "user": "shop", "port": 5432},
    "disk_full": {"container": TC, "pid": 4242, "file": "/var/lib/x/.cache-1"},
    "latent_sector_error": {"container": TC, "pid": 4242, "pid_start": "123456", "mechanism": "fuse",
                            "files": [{"path": "/data/db", "size": 8192, "blocks": [1], "token": "v1",
                                       "node_path": "", "node_ns": ""}]},
    "noise_cpu_burst": {"node": "n1", "token": "cpu-1"},
    "noise_load_spike": {"node": "n1", "service": "web", "ip": "10.96.0.7", "port": 80, "token": "t1",
                         "log": "/var/lib/sregym/t1.log"},
    "noise_log_burst": {"container": TC, "pid": 4242, "token": "log-1", "lines": ["WARN slow"]},
    "noise_manual_edit": {"edits": [{**EDIT, "path": ["metadata", "labels", "team"], "before": {"$absent": True},
                                     "after": "platform"}], "kind": "Deployment", "namespace": "app", "name": "web"},
    "noise_network_blip": {"node": "n1", "pod": "web-5d9c-x1", "pid": 4242, "chain": "SG-b", "rules": ["-j DROP"]},
    "noise_pod_restart": {"namespace": "app", "pod": "web-5d9c-x1", "uid": "0b7e-uid"},
    "noise_rolling_restart": {"edits": [EDIT], "namespace": "app", "name": "web", "stamp": "2026-11-01T10:00:00Z"},
    "process_signal": {"container": TC, "processes": [[4242, "123456"]]},
    "resource_stress": {"container": TC, "token": "s1", "cgroups": []},
    "syscall_failure": {"container": TC, "token": "t1", "other_containers": []},
    "slow_disk": {"container": TC, "token": "t1", "other_containers": []},
}
# the other shapes one primitive plans, by mechanism
OTHER_SHAPES = [
    ("syscall_failure", {**WORKLOAD, "profile": {"defaultAction": "SCMP_ACT_ALLOW"}, "profile_path": "profiles/a.json",
                         "nodes": ["n1"]}),
    ("network_policy_deny", NETNS),
    ("unschedulable", WORKLOAD),
]


def test_every_builtin_primitive_that_plans_state_has_a_typed_state_whose_old_form_is_tested():
    INJECTORS.load()
    builtin = {n for n, cls in INJECTORS.items() if cls.__module__.startswith("injectors.")}
    assert builtin and builtin <= set(OLD_STATES), sorted(builtin - set(OLD_STATES))
    assert all(INJECTORS.get(n).State is not None for n in builtin)


@pytest.mark.parametrize(("name", "old"), OTHER_SHAPES)
def test_each_shape_a_primitive_plans_loads_typed_and_dumps_unchanged(name: str, old: dict):
    cls = INJECTORS.get(name)
    assert json.loads(json.dumps(cls.dump_state(cls.load_state(old)))) == old


def test_a_typed_state_reads_like_the_journal():
    state = INJECTORS.get("network_partition").load_state(OLD_STATES["network_partition"])
    assert (state.pid, state.chain, state.peer_ips, state.container["node"]) == (4242, "SG-1a2b3c", ["10.0.0.9"], "n1")
    seccomp = INJECTORS.get("syscall_failure").load_state(OTHER_SHAPES[0][1])
    assert seccomp.container == "web" and seccomp.workload == ["Deployment", "app", "web"]


def test_a_typed_state_also_reads_by_key_as_dict_states_did():
    """Scripts, tests and plug-ins read states by key when every state was a dict; the live tests
    did (14 of them failed in CI once the built-ins' states became typed)."""
    state = INJECTORS.get("network_partition").load_state({**OLD_STATES["network_partition"], "legacy": 1})
    assert state["pid"] == 4242 and state["container"]["node"] == "n1" and state["legacy"] == 1
    assert state.get("pid") == 4242 and state.get("nosuch") is None and state.get("nosuch", 7) == 7
    assert "chain" in state and "legacy" in state and "nosuch" not in state and "model_dump" not in state
    with pytest.raises(KeyError):
        state["model_dump"]  # only fields and journaled keys, never the model's own attributes


@pytest.mark.parametrize("name", sorted(OLD_STATES))
def test_an_old_journaled_state_loads_typed_and_dumps_unchanged(name: str):
    cls = INJECTORS.get(name)
    assert cls.State is not None and issubclass(cls.State, PlannedState)
    state = cls.load_state(OLD_STATES[name])
    assert isinstance(state, cls.State)
    assert json.loads(json.dumps(cls.dump_state(state))) == OLD_STATES[name]


def test_pod_kill_reads_the_pods_of_an_old_journal_entry():
    state = INJECTORS.get("pod_kill").load_state(OLD_STATES["pod_kill"])
    assert state.pods == [("app", "web-5d9c-x1", "0b7e-uid"), ("app", "web-5d9c-x2", "1c8f-uid")]


def test_a_primitive_without_a_state_model_keeps_its_dict():
    from sregym.injectors import Injector, Verification

    class Untyped(Injector):  # a plug-in may still plan a plain dict
        def inject(self, state): ...
        def verify(self, state): return Verification(True, "")
        def recover(self, state): ...

    assert Untyped.State is None
    raw = {"edits": [], "workload": ["Deployment", "app", "web"], "container": "web"}
    assert Untyped.load_state(raw) is raw and Untyped.dump_state(raw) == raw


def test_a_context_rebuilt_from_an_old_journal_has_the_runs_labels_and_exclusions():
    extras = {"run_id": "r1", "labels": {"a": "b"}, "exclude": ["geo"], "node": "n1"}
    ctx = FaultContext.from_journal(extras, kube=None, app_namespace="app", hidden_namespace="hidden")
    assert (ctx.run_id, ctx.labels, ctx.exclude, ctx.node, ctx.only_pods) == ("r1", {"a": "b"}, ["geo"], "n1", None)
    assert ctx.journal_fields() == extras


def test_a_context_without_journaled_labels_still_labels_what_it_creates_as_sregyms():
    ctx = FaultContext.from_journal({}, kube=None, app_namespace="app", hidden_namespace="hidden")
    from sregym.core.constants import OWNER_LABEL, OWNER_VALUE
    assert ctx.labels == {OWNER_LABEL: OWNER_VALUE}
