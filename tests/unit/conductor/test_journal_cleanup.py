"""The journal and cleanup, with a fault primitive loaded from a temporary plug-in folder that
records its effect in a file (pure logic: no cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from sregym.cluster.scratch import process_start_time
from sregym.conductor.cleanup import cleanup_all
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.journal import Journal, RunHeader, open_journals, read_journal
from sregym.core.problem import Selector
from sregym.core.registry import import_path

FAKES = Path(__file__).parent / "fakes"  # plug-in folder: a primitive that edits a JSON file


@pytest.fixture()
def world(tmp_path: Path) -> Path:
    import_path(FAKES)
    state = tmp_path / "world.json"
    state.write_text(json.dumps({"a": "good", "b": "good"}))
    return state


def plane_for(journal: Journal) -> FaultPlane:
    return FaultPlane(journal=journal, kube=None, app_namespace="app", run_id=journal.run_id, run_seed=1)


async def start(plane: FaultPlane, key: str, world: Path) -> None:
    await plane.start(key=key, kind="fault", injector="unit_file_value",
                      params={"file": str(world), "value": f"broken-{key}"}, target=Selector(name=key))


def test_intent_is_journaled_before_inject_and_recover_closes_it(world: Path, tmp_path: Path):
    journal = Journal("r1", tmp_path / "journal")
    journal.start(RunHeader(run_id="r1", problem_id="p"))
    plane = plane_for(journal)

    async def go():
        await start(plane, "a", world)
        rj = read_journal(journal.path)
        assert [i.key for i in rj.open_intents] == ["a"]
        assert rj.open_intents[0].state == {"original": "good"}
        assert (await plane.verify("a", timeout=1)).ok
        assert await plane.recover_all() == []

    anyio.run(go)
    assert json.loads(world.read_text()) == {"a": "good", "b": "good"}
    assert read_journal(journal.path).open_intents == []
    journal.close()
    assert open_journals(tmp_path / "journal") == []


def test_cleanup_after_a_crash_recovers_open_intents_newest_first(world: Path, tmp_path: Path):
    directory = tmp_path / "journal"
    journal = Journal("r2", directory)
    journal.start(RunHeader(run_id="r2", problem_id="p", pid=999_999_999))
    plane = plane_for(journal)

    async def crash_midway():
        await start(plane, "a", world)
        await start(plane, "b", world)
        await plane.stop("a")  # 'a' was recovered by the run; 'b' is left behind by the "crash"

    anyio.run(crash_midway)
    assert json.loads(world.read_text()) == {"a": "good", "b": "broken-b"}
    results = cleanup_all(lambda header: None, directory=directory)
    assert [(r.run_id, r.recovered, r.errors, r.closed) for r in results] == [("r2", ["b"], [], True)]
    assert json.loads(world.read_text()) == {"a": "good", "b": "good"}
    assert open_journals(directory) == []
    assert cleanup_all(lambda header: None, directory=directory) == []  # idempotent: nothing left


def test_cleanup_undoes_an_intent_whose_inject_never_ran(world: Path, tmp_path: Path):
    directory = tmp_path / "journal"
    journal = Journal("r3", directory)
    journal.start(RunHeader(run_id="r3", problem_id="p", pid=999_999_999))
    intent, _ = plane_for(journal).plan_intent(key="a", kind="fault", injector="unit_file_value",
                                              params={"file": str(world), "value": "x"}, target=Selector(name="a"),
                                              mechanism=None)
    journal.intent(intent)  # killed between the journal write and inject()
    [result] = cleanup_all(lambda header: None, directory=directory)
    assert result.recovered == ["a"] and result.closed
    assert json.loads(world.read_text())["a"] == "good"


def test_a_torn_last_line_is_tolerated(tmp_path: Path):
    journal = Journal("r4", tmp_path)
    journal.start(RunHeader(run_id="r4", problem_id="p"))
    with journal.path.open("a") as f:
        f.write('{"op": "intent", "run_id": "r4", "ke')  # SIGKILL mid-write
    rj = read_journal(journal.path)
    assert rj.corrupt_lines == 1 and rj.header is not None and rj.open_intents == []


def test_cleanup_leaves_a_live_run_alone(world: Path, tmp_path: Path):
    import os
    import subprocess
    import sys

    directory = tmp_path / "journal"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "sregym"])
    try:
        journal = Journal("r5", directory)
        journal.start(RunHeader(run_id="r5", problem_id="p", pid=sleeper.pid))
        anyio.run(start, plane_for(journal), "a", world)
        [result] = cleanup_all(lambda header: None, directory=directory)
        assert result.skipped and "still running" in result.skipped
        assert json.loads(world.read_text())["a"] == "broken-a"
        [forced] = cleanup_all(lambda header: None, directory=directory, force=True)
        assert forced.recovered == ["a"]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert os.getpid() != sleeper.pid


def test_the_cleanup_command_imports_the_runs_plugins_in_a_fresh_process(world: Path, tmp_path: Path):
    """After a crash, `sregym cleanup` (a new process) rebuilds plug-in injectors from the journal."""
    import os
    import subprocess
    import sys

    state = tmp_path / "state"
    journal = Journal("r6", state / "journal")
    journal.start(RunHeader(run_id="r6", problem_id="p", pid=999_999_999, plugins=[str(FAKES)],
                            kubeconfig=str(tmp_path / "cluster-long-gone.kubeconfig")))
    anyio.run(start, plane_for(journal), "a", world)
    # the killed run's API proxy left its private folder; a live run's folder (this process's) stays
    tmp = tmp_path / "tmp"
    (tmp / "sregym-agentproxy-killed").mkdir(parents=True)
    (tmp / "sregym-agentproxy-killed" / ".sregym-owner").write_text("999999999 1\n")
    (tmp / "sre-tools-live").mkdir()
    (tmp / "sre-tools-live" / ".sregym-owner").write_text(f"{os.getpid()} {process_start_time(os.getpid())}\n")
    proc = subprocess.run([sys.executable, "-m", "sregym", "cleanup"],
                          env={**os.environ, "SREGYM_STATE": str(state), "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "clean r6: recovered a" in proc.stderr
    assert json.loads(world.read_text())["a"] == "good"
    assert "removed 1 scratch folder(s) of killed runs" in proc.stderr
    assert sorted(p.name for p in tmp.iterdir()) == ["sre-tools-live"]


def test_cleanup_stops_a_killed_runs_helper_process(tmp_path: Path):
    import subprocess
    import sys

    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "unit-tool-server"],
                              start_new_session=True)
    try:
        journal = Journal("r7", tmp_path)
        journal.start(RunHeader(run_id="r7", problem_id="p", pid=999_999_999))
        journal.process(helper.pid, "unit-tool-server")
        journal.process(999_999_998, "long-gone")  # already dead: ignored
        [result] = cleanup_all(lambda header: None, directory=tmp_path)
        assert result.stopped == [f"unit-tool-server ({helper.pid})"] and result.closed
        assert helper.wait(timeout=10) == -9
    finally:
        if helper.poll() is None:
            helper.kill()
            helper.wait()


# -- what the agent made, after a crash ---------------------------------------------------------


def test_the_snapshot_before_the_agent_round_trips_through_the_journal(tmp_path: Path):
    from sregym.conductor.agent_objects import Snapshot

    before = Snapshot("shop", ["deployments.apps"], {("deployments.apps", "api"): ("u1", "7", "Deployment")},
                      namespace_uid="n1")
    journal = Journal("r10", tmp_path)
    journal.start(RunHeader(run_id="r10", problem_id="p"))
    journal.before_agent("shop-release", before.to_dict())
    rj = read_journal(journal.path)
    assert rj.before_agent is not None and rj.before_agent.release == "shop-release"
    assert Snapshot.from_dict(rj.before_agent.snapshot) == before
    assert len(journal.path.read_text().splitlines()[-1]) < 400  # compact: one short line


class AppNamespace:
    """The app namespace as kubectl sees it (objects by resource and name, uids handed out in order),
    and every call the cleanup made, in order, in ``log``."""

    def __init__(self, name: str, log: list[str]):
        self.name, self.uid, self.log = name, "ns-uid-1", log
        self.objects: dict[tuple[str, str], dict] = {}
        self.next_uid = 0

    def add(self, resource: str, name: str, kind: str) -> None:
        self.next_uid += 1
        self.objects[(resource, name)] = {"kind": kind, "metadata": {
            "name": name, "uid": f"u{self.next_uid}", "resourceVersion": "1"}}

    def kubectl(self, *args: str, check: bool = True, timeout: float | None = None, input: str | None = None):
        from types import SimpleNamespace

        self.log.append("kubectl " + " ".join(args[:2]))
        if args[0] == "delete" and "/" in args[1]:
            self.objects.pop(tuple(args[1].split("/", 1)), None)
        return SimpleNamespace(returncode=0, stdout="", stderr="")

    # the API reads (sregym.cluster.kube.Kube): the namespace and one list per kind
    def get_json(self, path: str):
        self.log.append(f"get {path}")
        return {"metadata": {"name": self.name, "uid": self.uid}} if path == f"/api/v1/namespaces/{self.name}" else None

    def preferred_version(self, group: str):
        return f"{group}/v1" if group else "v1"

    def list_json(self, api_version: str, plural: str, namespace: str | None):
        self.log.append(f"list {plural}")
        group = api_version.rpartition("/")[0]
        res = f"{plural}.{group}" if group else plural
        return {"kind": "List", "items": [o for (r, _), o in sorted(self.objects.items()) if r == res]}


class Calls:
    """An API group (kube.core, kube.rbac) that answers every call with None and logs its name."""

    def __init__(self, log: list[str]):
        self.log = log

    def __getattr__(self, name: str):
        return lambda *a, **k: self.log.append(name)


def fake_kube(app: AppNamespace, tmp_path: Path):
    from types import SimpleNamespace

    return SimpleNamespace(kubectl=app.kubectl, get_json=app.get_json, preferred_version=app.preferred_version,
                           list_json=app.list_json, core=Calls(app.log), rbac=Calls(app.log),
                           kubeconfig=tmp_path / "admin.kubeconfig", context=None)


@pytest.fixture()
def release(monkeypatch):
    """The app's release holds Deployment ``api`` (helm is not asked: pure logic)."""
    from sregym.conductor import agent_objects

    monkeypatch.setattr(agent_objects, "manifest", lambda cluster, name, ns: "kind: Deployment")
    monkeypatch.setattr(agent_objects, "release_objects", lambda cluster, name, ns, text: {("Deployment", "api")})
    monkeypatch.setattr(agent_objects, "drifted", lambda cluster, name, ns, text: [])


def test_what_the_agent_created_before_the_conductor_was_killed_is_removed_by_cleanup(tmp_path: Path, release):
    """The attack: the agent applies an escalation Deployment, then the conductor is SIGKILLed (its
    in-memory snapshot and finally-block teardown are lost). `sregym cleanup` must delete it."""
    from sregym.cluster.handle import ClusterHandle
    from sregym.conductor import agent_objects

    log: list[str] = []
    app = AppNamespace("shop", log)
    app.add("deployments.apps", "api", "Deployment")
    app.add("configmaps", "kube-root-ca.crt", "ConfigMap")
    kube = fake_kube(app, tmp_path)
    journal = Journal("r8", tmp_path)
    journal.start(RunHeader(run_id="r8", problem_id="p", pid=999_999_999))
    before = agent_objects.snapshot(ClusterHandle.of(kube), "shop")
    journal.before_agent("shop", before.to_dict())  # what run_problem journals before the agent starts
    app.add("deployments.apps", "escalate", "Deployment")  # the agent's, then the crash

    [result] = cleanup_all(lambda header: kube, directory=tmp_path)
    assert ("deployments.apps", "escalate") not in app.objects
    assert set(app.objects) == {("deployments.apps", "api"), ("configmaps", "kube-root-ca.crt")}
    assert [(o.name, o.change, o.removed) for o in result.agent_objects] == [("escalate", "created", True)]
    assert result.closed and not result.errors
    assert cleanup_all(lambda header: kube, directory=tmp_path) == []  # idempotent: nothing left


def test_cleanup_tears_down_with_the_journaled_snapshot_only_once_the_agent_is_stopped(
        world: Path, tmp_path: Path, monkeypatch):
    from sregym.conductor import agent_objects, cleanup
    from sregym.conductor.agent_objects import Snapshot

    log: list[str] = []
    kube = fake_kube(AppNamespace("app", log), tmp_path)
    monkeypatch.setattr(cleanup, "stop_processes", lambda *a: log.append("stop tool server") or [])
    monkeypatch.setattr(cleanup, "delete_sandbox_namespace", lambda kube, ns: log.append(f"delete sandbox {ns}"))
    torn_down: list[tuple[Snapshot, str]] = []

    def teardown(cluster, before, release):
        assert json.loads(world.read_text())["a"] == "good"  # the faults were recovered first
        log.append("teardown")
        torn_down.append((before, release))
        return []

    monkeypatch.setattr(agent_objects, "teardown", teardown)
    journal = Journal("r11", tmp_path / "journal")
    journal.start(RunHeader(run_id="r11", problem_id="p", pid=999_999_999))
    anyio.run(start, plane_for(journal), "a", world)
    before = Snapshot("app", ["deployments.apps"], {("deployments.apps", "api"): ("u1", "3", "Deployment")})
    journal.sandbox("sre-workbench-1")
    journal.before_agent("app-release", before.to_dict())

    [result] = cleanup_all(lambda header: kube, directory=tmp_path / "journal")
    assert torn_down == [(before, "app-release")]
    assert log.index("stop tool server") < log.index("delete sandbox sre-workbench-1") < log.index("teardown")
    assert log.index("delete_namespaced_role_binding") < log.index("teardown")  # its access revoked first
    assert log[-1] == "teardown" and result.closed and result.recovered == ["a"]


def test_a_journal_without_the_snapshot_cleans_up_as_before(world: Path, tmp_path: Path, monkeypatch):
    """A run killed before its agent phase (or journaled by an older sregym) has no snapshot."""
    from sregym.conductor import agent_objects

    def teardown(*args):
        raise AssertionError("nothing to tear down without a snapshot")

    monkeypatch.setattr(agent_objects, "teardown", teardown)
    log: list[str] = []
    kube = fake_kube(AppNamespace("app", log), tmp_path)
    journal = Journal("r12", tmp_path / "journal")
    journal.start(RunHeader(run_id="r12", problem_id="p", pid=999_999_999))
    anyio.run(start, plane_for(journal), "a", world)
    [result] = cleanup_all(lambda header: kube, directory=tmp_path / "journal")
    assert result.recovered == ["a"] and result.closed and result.agent_objects == [] and not result.errors
    assert "delete_namespaced_role" in log  # the agent's access to the app namespace is still revoked


def test_an_agent_object_that_could_not_be_deleted_keeps_the_journal_open_until_a_later_cleanup(
        tmp_path: Path, release):
    from sregym.cluster.handle import ClusterHandle
    from sregym.conductor import agent_objects

    log: list[str] = []
    app = AppNamespace("shop", log)
    app.add("deployments.apps", "api", "Deployment")
    kube = fake_kube(app, tmp_path)
    journal = Journal("r13", tmp_path)
    journal.start(RunHeader(run_id="r13", problem_id="p", pid=999_999_999))
    journal.before_agent("shop", agent_objects.snapshot(ClusterHandle.of(kube), "shop").to_dict())
    app.add("configmaps", "notes", "ConfigMap")
    refused = app.kubectl

    def kubectl(*args, **kw):
        if args[0] == "delete" and "/" in args[1]:
            from types import SimpleNamespace
            return SimpleNamespace(returncode=1, stdout="", stderr="the server was unavailable")
        return refused(*args, **kw)

    kube.kubectl = kubectl
    [first] = cleanup_all(lambda header: kube, directory=tmp_path)
    assert not first.closed and ("configmaps", "notes") in app.objects
    assert first.errors == ["deleting the agent's configmaps/notes in shop: the server was unavailable"]
    kube.kubectl = refused
    [second] = cleanup_all(lambda header: kube, directory=tmp_path)
    assert second.closed and [o.name for o in second.agent_objects if o.removed] == ["notes"]
    assert set(app.objects) == {("deployments.apps", "api")}


def test_a_namespace_a_live_run_works_in_is_left_to_it(tmp_path: Path, release, monkeypatch):
    """A run killed mid-agent, then a new run in the same namespace, then cleanup while it runs: the
    new run's agent access and its objects (new since the old snapshot) must not be touched."""
    import subprocess
    import sys

    from sregym.cluster.handle import ClusterHandle
    from sregym.conductor import agent_objects

    log: list[str] = []
    app = AppNamespace("shop", log)
    kube = fake_kube(app, tmp_path)
    old = Journal("r14", tmp_path)
    old.start(RunHeader(run_id="r14", problem_id="p", pid=999_999_999))
    old.before_agent("shop", agent_objects.snapshot(ClusterHandle.of(kube), "shop").to_dict())
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "sregym"])
    try:
        new = Journal("r15", tmp_path)
        new.start(RunHeader(run_id="r15", problem_id="p", pid=live.pid))
        new.before_agent("shop", agent_objects.snapshot(ClusterHandle.of(kube), "shop").to_dict())
        app.add("deployments.apps", "live-runs-agent-made-this", "Deployment")
        results = {r.run_id: r for r in cleanup_all(lambda header: kube, directory=tmp_path)}
    finally:
        live.kill()
        live.wait()
    assert results["r15"].skipped and not results["r14"].closed
    assert "in use by the live run r15" in results["r14"].errors[0]
    assert ("deployments.apps", "live-runs-agent-made-this") in app.objects
    assert not any(call.startswith("delete_") for call in log)  # no access revoked


def test_the_cleanup_line_names_what_the_agent_made():
    from sregym.cli.runs import agent_objects_summary
    from sregym.core.record import AgentObject

    objects = [AgentObject(resource="deployments.apps", namespace="shop", name="escalate", change="created",
                           removed=True),
               AgentObject(resource="(release)", namespace="shop", name="api", change="drifted")]
    assert agent_objects_summary(objects) == ("; removed the agent's deployments.apps/escalate; changed by the agent "
                                              "(not undone; the next deploy resets the release's): (release)/api")
    assert agent_objects_summary([]) == ""


# A journal line exactly as sregym wrote intents before primitives could declare a typed state and
# before FaultContext had typed fields (state a plain dict; run id and labels under "extras").
OLD_INTENT = {"op": "intent", "run_id": "old1", "t": 1.0, "key": "a", "intent": {
    "key": "a", "kind": "fault", "injector": "unit_typed_file_value", "params": {"file": "WORLD", "value": "x"},
    "target": {"name": "a"}, "mechanism": "kubernetes-api", "state": {"original": "good"},
    "app_namespace": "app", "hidden_namespace": "node-ops", "seed": 7,
    "extras": {"run_id": "old1", "labels": {"app.kubernetes.io/managed-by": "sregym", "node-ops/run": "old1"},
               "exclude": ["geo"], "node": None}}}


def test_a_journal_written_before_typed_state_still_recovers(world: Path, tmp_path: Path):
    directory = tmp_path / "journal"
    journal = Journal("old1", directory)
    journal.start(RunHeader(run_id="old1", problem_id="p", pid=999_999_999))
    data = json.loads(world.read_text())
    world.write_text(json.dumps({**data, "a": "x"}))  # the old run had injected
    line = json.dumps(OLD_INTENT).replace("WORLD", str(world))
    with journal.path.open("a") as f:
        f.write(line + "\n" + json.dumps({"op": "applied", "run_id": "old1", "t": 2.0, "key": "a"}) + "\n")
    [result] = cleanup_all(lambda header: None, directory=directory)
    assert result.recovered == ["a"] and result.errors == [] and result.closed
    after = json.loads(world.read_text())
    assert after["a"] == "good"
    assert after["_recovered_with"] == {"state": "FileState", "run_id": "old1", "exclude": ["geo"],
                                        "labels": OLD_INTENT["intent"]["extras"]["labels"]}


def test_typed_state_is_journaled_as_the_same_json_and_handed_back_typed(world: Path, tmp_path: Path):
    journal = Journal("t1", tmp_path / "journal")
    journal.start(RunHeader(run_id="t1", problem_id="p"))
    plane = plane_for(journal)

    async def go():
        await plane.start(key="a", kind="fault", injector="unit_typed_file_value",
                          params={"file": str(world), "value": "broken"}, target=Selector(name="a"))
        [intent] = read_journal(journal.path).open_intents
        assert intent.state == {"original": "good"}  # plain JSON, as before typed states
        assert set(intent.extras) == {"run_id", "labels", "exclude", "node"}  # the keys journals always had
        assert intent.extras["run_id"] == "t1"
        assert await plane.recover_all() == []

    anyio.run(go)
    after = json.loads(world.read_text())
    assert after["a"] == "good" and after["_recovered_with"]["state"] == "FileState"


def test_a_helper_pid_that_another_process_has_now_is_not_stopped(tmp_path: Path):
    """The journaled tool server exited and the kernel gave its pid to another process whose command
    line names the same module (another run's tool server): its start time tells them apart."""
    import subprocess
    import sys

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "unit-tool-server"],
                             start_new_session=True)
    try:
        journal = Journal("r8", tmp_path)
        journal.start(RunHeader(run_id="r8", problem_id="p", pid=999_999_999))
        journal.process(other.pid, "unit-tool-server")
        lines = journal.path.read_text().splitlines()
        entry = json.loads(lines[-1])
        assert entry["start"]  # journaled with its identity
        entry["start"] = str(int(entry["start"]) - 1)  # the journaled process started earlier: not this one
        journal.path.write_text("\n".join([*lines[:-1], json.dumps(entry)]) + "\n")
        [result] = cleanup_all(lambda header: None, directory=tmp_path)
        assert result.stopped == [] and result.closed
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


# The journaled helper exits right after cleanup checked it and the kernel gives its pid to another
# process with the same command line (another run's tool server), before cleanup signals. A real pid
# reuse: in a pid namespace of its own nothing else forks, so ns_last_pid sets the next pid.
REPLACED_AFTER_THE_CHECK = """
import os, signal, subprocess, sys
from pathlib import Path
from sregym.conductor.cleanup import cleanup_all
from sregym.conductor.journal import Journal, RunHeader

ARGV = [sys.executable, "-c", "import time; time.sleep(60)", "unit-tool-server"]
journaled = subprocess.Popen(ARGV, start_new_session=True)
journal = Journal("r-race", Path(sys.argv[1]))
journal.start(RunHeader(run_id="r-race", problem_id="p", pid=999_999_999))
journal.process(journaled.pid, "unit-tool-server")
real_kill, successor = os.kill, []

def replace():
    real_kill(journaled.pid, signal.SIGKILL)
    journaled.wait()
    Path("/proc/sys/kernel/ns_last_pid").write_text(str(journaled.pid - 1))
    successor.append(subprocess.Popen(ARGV, start_new_session=True))
    assert successor[0].pid == journaled.pid, (successor[0].pid, journaled.pid)

def after_the_check(send):
    def sending(*args, **kwargs):
        if not successor:
            replace()
        return send(*args, **kwargs)
    return sending

os.kill, os.killpg = after_the_check(os.kill), after_the_check(os.killpg)
signal.pidfd_send_signal = after_the_check(signal.pidfd_send_signal)
[result] = cleanup_all(lambda header: None, directory=Path(sys.argv[1]))
print(successor[0].poll(), result.stopped, flush=True)
successor[0].kill()
"""


def test_a_helper_replaced_between_the_check_and_the_signal_is_not_signalled(tmp_path: Path):
    import os
    import subprocess
    import sys

    proc = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                           REPLACED_AFTER_THE_CHECK, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[0] == "None []"  # the other process runs on; nothing was stopped


# -- journals of an older sregym: no command line (older still: no start time) ------------------------


def journal_with_helper(tmp_path: Path, run_id: str, pid: int, **entry_changes) -> Journal:
    """A run that journaled the helper ``pid``, its entry rewritten as an older sregym wrote it (a
    field set to None is dropped)."""
    journal = Journal(run_id, tmp_path)
    journal.start(RunHeader(run_id=run_id, problem_id="p", pid=999_999_999))
    journal.process(pid, "unit-tool-server")
    *lines, last = journal.path.read_text().splitlines()
    entry = {k: v for k, v in {**json.loads(last), **entry_changes}.items() if v is not None}
    journal.path.write_text("\n".join([*lines, json.dumps(entry)]) + "\n")
    return journal


@pytest.fixture()
def tool_server():
    """A stand-in for a killed run's tool server, in a session of its own with a child in its group."""
    import subprocess
    import sys

    helper = subprocess.Popen([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '60']); "
                               "print(flush=True); time.sleep(60)", "unit-tool-server"],
                              start_new_session=True, stdout=subprocess.PIPE)
    helper.stdout.readline()  # its child runs
    yield helper
    import os
    import signal

    if helper.poll() is None:
        os.killpg(helper.pid, signal.SIGKILL)
        helper.wait()
    helper.stdout.close()


def group_of(pid: int) -> list[int]:
    from sregym.cluster.owned_processes import ProcessIdentity

    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and ProcessIdentity.of(int(p.name))
            and (Path(p, "stat").read_text().rsplit(")", 1)[-1].split()[2:3] == [str(pid)])]


def test_a_new_journal_names_the_helper_by_its_command_line(tmp_path: Path, tool_server):
    journal = journal_with_helper(tmp_path, "r-new", tool_server.pid)
    [process] = read_journal(journal.path).helpers.values()
    assert process.cmdline == tuple(Path(f"/proc/{tool_server.pid}/cmdline").read_text().split("\0")[:-1])
    assert process.start == process_start_time(tool_server.pid)


def test_the_helper_and_its_children_are_stopped(tmp_path: Path, tool_server):
    journal_with_helper(tmp_path, "r-group", tool_server.pid)
    assert len(group_of(tool_server.pid)) == 2
    [result] = cleanup_all(lambda header: None, directory=tmp_path)
    assert result.stopped == [f"unit-tool-server ({tool_server.pid})"] and result.closed
    assert tool_server.wait(timeout=10) == -9
    assert group_of(tool_server.pid) == []  # its child went with it


def test_on_a_kernel_without_group_pidfd_signals_the_group_is_stopped_through_its_held_leader(
        tmp_path: Path, tool_server, monkeypatch):
    import errno
    import signal

    sent = []
    real = signal.pidfd_send_signal

    def before_6_9(fd, sig, siginfo=None, flags=0):
        if flags:
            raise OSError(errno.EINVAL, "Invalid argument")
        sent.append(sig)
        return real(fd, sig)

    monkeypatch.setattr(signal, "pidfd_send_signal", before_6_9)
    journal_with_helper(tmp_path, "r-old-kernel", tool_server.pid)
    [result] = cleanup_all(lambda header: None, directory=tmp_path)
    assert result.stopped == [f"unit-tool-server ({tool_server.pid})"]
    assert sent == [signal.SIGSTOP] and tool_server.wait(timeout=10) == -9
    assert group_of(tool_server.pid) == []


def test_an_entry_without_a_command_line_is_stopped_by_its_start_time(tmp_path: Path, tool_server):
    journal_with_helper(tmp_path, "r-old", tool_server.pid, cmdline=None)
    [result] = cleanup_all(lambda header: None, directory=tmp_path)
    assert result.stopped == [f"unit-tool-server ({tool_server.pid})"] and result.closed
    assert tool_server.wait(timeout=10) == -9


def test_an_entry_without_a_command_line_and_another_start_time_is_not_stopped(tmp_path: Path, tool_server):
    start = str(int(process_start_time(tool_server.pid)) - 1)
    journal_with_helper(tmp_path, "r-old-other", tool_server.pid, cmdline=None, start=start)
    [result] = cleanup_all(lambda header: None, directory=tmp_path)
    assert result.stopped == [] and result.closed
    assert tool_server.poll() is None


def test_an_entry_without_a_command_line_that_names_another_module_is_not_stopped(tmp_path: Path, tool_server):
    journal_with_helper(tmp_path, "r-old-module", tool_server.pid, cmdline=None, key="agentproxy")
    [result] = cleanup_all(lambda header: None, directory=tmp_path)
    assert result.stopped == [] and tool_server.poll() is None


def test_an_entry_without_start_time_is_stopped_if_the_process_ran_before_it_was_written(tmp_path: Path,
                                                                                       tool_server):
    journal_with_helper(tmp_path, "r-older", tool_server.pid, cmdline=None, start=None)
    [result] = cleanup_all(lambda header: None, directory=tmp_path)
    assert result.stopped == [f"unit-tool-server ({tool_server.pid})"] and result.closed
    assert tool_server.wait(timeout=10) == -9


def test_an_entry_without_start_time_is_not_stopped_if_the_process_started_after_it(tmp_path: Path, tool_server):
    """The journaled process held the pid when the entry was written: one that started later is another."""
    import time

    journal_with_helper(tmp_path, "r-older-other", tool_server.pid, cmdline=None, start=None, t=time.time() - 60)
    [result] = cleanup_all(lambda header: None, directory=tmp_path)
    assert result.stopped == [] and result.closed
    assert tool_server.poll() is None


def test_a_recycled_pid_is_not_taken_for_the_live_run(world: Path, tmp_path: Path):
    """The run's process is known by its start time too: another process that now has its pid (even
    one whose command line names sregym) does not keep cleanup away from a killed run's faults."""
    import subprocess
    import sys

    directory = tmp_path / "journal"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "sregym"])
    try:
        journal = Journal("r6", directory)
        journal.start(RunHeader(run_id="r6", problem_id="p", pid=sleeper.pid, pid_start="1"))  # not its start
        anyio.run(start, plane_for(journal), "a", world)
        [result] = cleanup_all(lambda header: None, directory=directory)
        assert not result.skipped and result.recovered == ["a"]
        assert json.loads(world.read_text())["a"] == "good"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_header_made_by_the_run_carries_its_process_start_time():
    import os

    header = RunHeader(run_id="r7", problem_id="p")
    assert (header.pid, header.pid_start) == (os.getpid(), process_start_time(os.getpid()))
    assert RunHeader.model_validate_json(header.model_dump_json()) == header
    old = RunHeader.model_validate({"run_id": "r8", "problem_id": "p", "pid": 12345})  # an older journal's
    assert old.pid_start is None
