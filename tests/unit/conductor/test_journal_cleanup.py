"""The journal and cleanup, with a fault primitive loaded from a temporary plug-in folder that
records its effect in a file (pure logic: no cluster)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

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
    proc = subprocess.run([sys.executable, "-m", "sregym", "cleanup"], env={**os.environ, "SREGYM_STATE": str(state)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "clean r6: recovered a" in proc.stderr
    assert json.loads(world.read_text())["a"] == "good"


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

