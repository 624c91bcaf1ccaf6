"""What mechanisms this kernel lacks would run, and clear refusals when they are forced."""

import json
import re

import pytest

from injectors.latent_sector_error import _PG_SESSION, LatentSectorError, choose_blocks, postgres_reopen_sql
from sregym.injectors import dust
from injectors.network_latency import NetworkLatency, netem_script, queue_number
from injectors.slow_disk import SlowDisk, SlowDiskParams, delay_argv
from injectors.syscall_failure import SyscallFailure, SyscallFailureParams, bcc_loader, bcc_program, seccomp_profile, strace_argv
from sregym.core.errors import MechanismUnavailable, UserInputError

THIS_VM = {"kprobes": False, "bpf_override_return": False, "bcc_compile": False, "device_mapper": False,
           "dm_dust": False, "loop": True, "netem": False, "tbf": True, "nfqueue": True, "fuse": True,
           "nsenter": True, "python3": True, "seccomp": True, "ptrace": True}


def test_a_postgres_relation_file_is_reopened_through_a_relcache_invalidation_only(tmp_path):
    """The FUSE mount reaches backends that opened the file before it only once they reopen it: for
    a relation file, a no-op update of its own pg_class row; no other file gets any statement."""
    find_db, reopen = postgres_reopen_sql("/var/lib/postgresql/data/pgdata/base/16384/2613")
    assert find_db == "SELECT datname FROM pg_database WHERE oid = 16384"
    assert reopen == "UPDATE pg_class SET relname = relname WHERE pg_relation_filepath(oid) = 'base/16384/2613'"
    assert postgres_reopen_sql("/data/blob") is None and postgres_reopen_sql("/x/base/16384/2613.1") is None
    compile(_PG_SESSION, "pg_session", "exec")


def test_the_reopen_step_reads_the_typed_state_it_is_given():
    """Inject hands ``_reopen_in_postgres`` the typed state: it enters the pid the plan recorded (it
    read ``state["pid"]`` when states were dicts, and failed the live inject once they were typed)."""
    class Runner:
        def __init__(self):
            self.argvs = []

        def run(self, argv, check=True):
            self.argvs.append(argv)
            out = "999 999 /run/postgresql 5432 postgres PATH=/usr/bin" if argv[:2] == ["python3", "-c"] else "shop"
            return type("Done", (), {"stdout": out, "returncode": 0})()

    runner, path = Runner(), "/var/lib/postgresql/data/pgdata/base/16384/2613"
    state = LatentSectorError.load_state({"pid": 4242, "files": [{"path": path}], "mechanism": "fuse-bad-blocks"})
    LatentSectorError._reopen_in_postgres(None, runner, state, state.files[0])
    assert runner.argvs[0][3] == "4242"  # the session lookup is of the planned process
    psql = [a for a in runner.argvs if a[0] == "nsenter"]
    assert len(psql) == 2 and all(a[2] == "4242" for a in psql) and psql[1][-1].startswith("UPDATE pg_class")


def test_dm_dust_table_marks_the_planned_blocks_bad_and_enables_failures():
    size = dust.image_size(10 << 20, 4096)
    assert size % 4096 == 0 and size >= 2 * (10 << 20)
    setup = dust.setup_commands("v1", "/run/x/v1.img", "/run/x/v1.mnt", 64 << 20, 4096)
    assert 'dmsetup create v1 --table "0 131072 dust $(cat /run/x/v1.img.loop) 0 4096"' in setup
    assert setup[-1] == "mkdir -p /run/x/v1.mnt && mount /dev/mapper/v1 /run/x/v1.mnt"
    bad = dust.badblock_commands("v1", [10, 99])
    assert bad == ["dmsetup message v1 0 addbadblock 10", "dmsetup message v1 0 addbadblock 99",
                   "dmsetup message v1 0 enable"]
    down = dust.teardown_commands("v1", "/run/x/v1.img", "/run/x/v1.mnt")
    assert any("dmsetup remove v1" in c for c in down) and all(c.endswith("true") or c.startswith("rm") for c in down)


def test_fibmap_and_move_mount_helpers_are_valid_python():
    compile(dust.FIBMAP_SCRIPT, "fibmap", "exec")
    compile(dust.MOVE_MOUNT_SCRIPT, "move_mount", "exec")


def test_forcing_dm_dust_without_device_mapper_refuses_with_what_is_missing():
    with pytest.raises(MechanismUnavailable, match="device_mapper, dm_dust"):
        LatentSectorError.choose_mechanism(THIS_VM, forced="dm-dust")
    assert LatentSectorError.choose_mechanism(THIS_VM).name == "fuse-bad-blocks"


def test_bad_blocks_are_a_seeded_choice_inside_the_file():
    a = choose_blocks(7, "/data/f", 40960, 4096, 3)
    assert a == choose_blocks(7, "/data/f", 40960, 4096, 3)
    assert len(set(a)) == 3 and all(0 <= b < 10 for b in a)
    assert choose_blocks(7, "/data/f", 100, 4096, 5) == [0]


def test_netem_is_refused_here_and_latency_falls_back_to_the_user_space_delay_queue():
    with pytest.raises(MechanismUnavailable, match="netem"):
        NetworkLatency.choose_mechanism(THIS_VM, forced="netem")
    assert NetworkLatency.choose_mechanism(THIS_VM).name == "nfqueue-delay"
    assert NetworkLatency.choose_mechanism({**THIS_VM, "nfqueue": False}).name == "tbf-queueing"
    assert "netem delay 150ms 20ms" in netem_script(150, 20)
    assert 1000 <= queue_number("POD-X") < 61000


def test_ebpf_override_program_fails_the_syscalls_for_one_cgroup_at_the_rate():
    p = SyscallFailureParams(syscalls=["openat", "read"], errno="EIO", rate=0.5)
    prog = bcc_program(p, 4242)
    assert "bpf_get_current_cgroup_id() != 4242ULL" in prog
    assert "bpf_override_return(ctx, -5)" in prog
    assert "syscall__openat" in prog and "syscall__read" in prog
    assert f"{int(0.5 * 0xFFFFFFFF)}U" in prog
    assert "get_syscall_fnname('openat')" in bcc_loader(p, 4242)
    with pytest.raises(MechanismUnavailable, match="bpf_override_return"):
        SyscallFailure.choose_mechanism(THIS_VM, forced="ebpf-override")


def test_seccomp_profile_returns_the_errno_for_exactly_the_syscalls():
    prof = seccomp_profile(SyscallFailureParams(syscalls=["write", "fsync"], errno="ENOSPC"))
    assert prof["defaultAction"] == "SCMP_ACT_ALLOW"
    assert prof["syscalls"] == [{"names": ["fsync", "write"], "action": "SCMP_ACT_ERRNO", "errnoRet": 28}]
    json.dumps(prof)


def test_syscall_failure_prefers_the_tracer_to_a_profile_in_the_pod_spec():
    """A seccompProfile in the pod spec would name the mechanism to an agent reading the spec:
    where eBPF is missing, ptrace is chosen, and seccomp only when a problem forces it."""
    assert SyscallFailure.choose_mechanism(THIS_VM).name == "ptrace"
    assert SyscallFailure.choose_mechanism(THIS_VM, forced="seccomp").name == "seccomp"


def test_strace_injects_every_nth_call_on_a_path_for_all_container_processes():
    argv = strace_argv(SyscallFailureParams(syscalls=["openat"], errno="EIO", rate=0.25, path="/data/x"),
                       [11, 12], "tok")
    s = " ".join(argv)
    assert "inject=openat:error=EIO:when=1+4" in s and "-P /data/x" in s and "-p 11 -p 12" in s
    full = " ".join(strace_argv(SyscallFailureParams(syscalls=["read"]), [1], "t"))
    assert "inject=read:error=EIO" in full and "when=" not in full


def test_slow_disk_delays_the_disk_waiting_calls_and_fails_none():
    """A slow disk holds fsync/fdatasync for the delay (strace's delay_enter, in microseconds); it
    never makes a call fail, and its tracer is the one mechanism this VM has for it."""
    argv = delay_argv(SlowDiskParams(delay_ms=600), "tok")
    s = " ".join(argv)
    assert "inject=fsync,fdatasync:delay_enter=600000" in s and "error=" not in s and "-p" not in argv
    assert SlowDisk.choose_mechanism(THIS_VM).name == "ptrace-delay"
    with pytest.raises(MechanismUnavailable, match="ptrace"):  # refused, never faked
        SlowDisk.choose_mechanism({**THIS_VM, "ptrace": False})
    with pytest.raises(UserInputError, match="delay_ms"):
        SlowDisk.parse_params({"delay_ms": 0})
    with pytest.raises(UserInputError, match="syscalls"):
        SlowDisk.parse_params({"delay_ms": 5, "syscalls": ["fsync; reboot"]})


def test_bad_params_name_the_field():
    with pytest.raises(UserInputError, match="errno"):
        SyscallFailure.parse_params({"syscalls": ["read"], "errno": "ENOTREAL"})
    with pytest.raises(UserInputError, match="syscalls"):
        SyscallFailure.parse_params({"syscalls": ["read; rm -rf /"]})
    with pytest.raises(UserInputError, match="paths"):
        LatentSectorError.parse_params({})


def test_names_created_on_nodes_are_neutral():
    from sregym.injectors._netns import chain_name
    from sregym.injectors._noise import token
    from injectors import latent_sector_error, syscall_failure

    telling = re.compile(r"chaos|fault|inject", re.I)
    for name in (chain_name("abc"), token("x", 1), latent_sector_error.WORK_DIR, syscall_failure.WORK_DIR):
        assert not telling.search(name), name


def test_network_policy_falls_back_to_iptables_where_policies_are_not_enforced():
    from injectors.network_policy_deny import NetworkPolicyDeny

    assert NetworkPolicyDeny.choose_mechanism({**THIS_VM, "iptables": True}).name == "iptables-egress-drop"
    assert NetworkPolicyDeny.choose_mechanism({"network_policy_enforcement": True}).name == "networkpolicy"
    with pytest.raises(MechanismUnavailable, match="network_policy_enforcement"):
        NetworkPolicyDeny.choose_mechanism(THIS_VM, forced="networkpolicy")


def test_bad_blocks_outlive_a_restart_unless_they_live_in_the_pod():
    """A restart must not cure latent sector errors: the copies that live in the pod (dm-dust's mount,
    a FUSE mount made in the container only) are carried by it and so re-applied to its replacement;
    the FUSE mount on the volume's directory on the node is carried by no pod."""
    lse = object.__new__(LatentSectorError)
    files = lambda *node_paths: [{"path": "/data/f", "node_path": n} for n in node_paths]  # noqa: E731
    container = {"pod_uid": "u1"}
    assert lse.dies_with_pod()
    assert lse.carrier_pods(lse.load_state({"mechanism": "fuse-bad-blocks", "files": files("/var/lib/x/f"), "container": container})) == set()
    assert lse.carrier_pods(lse.load_state({"mechanism": "fuse-bad-blocks", "files": files("/var/lib/x/f", ""),
                             "container": container})) == {"u1"}
    assert lse.carrier_pods(lse.load_state({"mechanism": "dm-dust", "files": files("/var/lib/x/f"), "container": container})) == {"u1"}
    # a mount made in the container's mount namespace goes with a restarted container too; the
    # node's mount is carried by neither
    container = {"pod_uid": "u1", "container_id": "containerd://c1"}
    assert lse.carriers(lse.load_state({"mechanism": "dm-dust", "files": files("/var/lib/x/f"), "container": container})) == {
        "u1", "containerd://c1"}
    assert lse.carriers(lse.load_state({"mechanism": "fuse-bad-blocks", "files": files("/var/lib/x/f"), "container": container})) == set()


def test_the_delay_queue_leaves_the_loopback_alone():
    """nfqueue-delay holds what leaves the pod, not its processes talking to each other: with the
    loopback delayed, pipeline-cache's exec readiness probe (redis-cli to 127.0.0.1, 1 s timeout)
    timed out and the pod turned NotReady, which a slow link never does."""
    from injectors.network_latency import LatencyState

    inj = NetworkLatency.__new__(NetworkLatency)
    inj.params = NetworkLatency.Params(delay_ms=300)
    inj.plan_target = lambda: LatencyState(container={"pod": "p"}, pid=1, chain="POD-abc")
    [rule] = inj.plan().rules
    assert rule.startswith("! -o lo ") and rule.endswith("--queue-bypass")
    inj.params = NetworkLatency.Params(delay_ms=300, peer_cidr="10.0.0.7")
    assert inj.plan().rules[0].startswith("! -o lo -d 10.0.0.7 -j NFQUEUE")
