"""Pod-scoped faults are kept in place: when the pod carrying one is replaced, the fault plane
re-applies it to the new pod (journaled first, as ``<fault>#2``), stopping the fault recovers every
copy newest first, and ``sregym cleanup`` recovers the copies a killed run left. Pure logic: a
JSON file stands for the target's pods (tests/unit/conductor/fakes/unit_pod_rule.py)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from sregym.conductor import faultplane
from sregym.conductor.cleanup import cleanup_all
from sregym.conductor.faultplane import FaultPlane, fault_of
from sregym.conductor.journal import Journal, RunHeader, read_journal
from sregym.core.problem import Selector
from sregym.core.registry import import_path

FAKES = Path(__file__).parent / "fakes"


@pytest.fixture()
def world(tmp_path: Path) -> Path:
    import_path(FAKES)
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"pod-1": []}))
    return path


def pods(world: Path) -> dict[str, list[str]]:
    return json.loads(world.read_text())


def replace_pod(world: Path, old: str, new: str) -> None:
    """What deleting a pod does: its controller starts another, which has none of the old rules."""
    data = pods(world)
    del data[old]
    data[new] = []
    tmp = world.with_suffix(".tmp")  # atomic, as the fake injector writes it from another thread
    tmp.write_text(json.dumps(data))
    tmp.replace(world)


def plane_for(journal: Journal, world: Path) -> FaultPlane:
    listed = lambda inj: [{"metadata": {"uid": uid}} for uid in pods(world)]  # noqa: E731
    return FaultPlane(journal=journal, kube=None, app_namespace="app", run_id=journal.run_id, run_seed=1,
                      target_pods=listed, watch_interval=0.05)


async def start(plane: FaultPlane, world: Path) -> None:
    await plane.start(key="cut", kind="fault", injector="unit_pod_rule", params={"file": str(world)},
                      target=Selector(kind="Deployment", name="api"))


async def eventually(check, timeout: float = 5.0) -> None:
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.02)


def test_a_replaced_pod_gets_the_fault_again_and_recover_undoes_every_copy(world: Path, tmp_path: Path):
    journal = Journal("p1", tmp_path / "journal")
    journal.start(RunHeader(run_id="p1", problem_id="p"))
    plane = plane_for(journal, world)

    async def go():
        await start(plane, world)
        assert pods(world) == {"pod-1": ["drop"]}
        replace_pod(world, "pod-1", "pod-2")
        # the copy is recorded just after its rule lands: wait for both
        await eventually(lambda: pods(world).get("pod-2") == ["drop"] and len(plane.reapplied) == 1)
        replace_pod(world, "pod-2", "pod-3")
        await eventually(lambda: pods(world).get("pod-3") == ["drop"] and len(plane.reapplied) == 2)
        assert (await plane.verify("cut", timeout=1)).ok  # the newest copy is what verify reads
        assert [r["key"] for r in plane.reapplied] == ["cut#2", "cut#3"]
        assert [r["pods"] for r in plane.reapplied] == [["pod-2"], ["pod-3"]]
        assert plane.mechanisms() == {"cut": plane.active["cut"].intent.mechanism}
        # every copy is journaled before it is applied
        entries = [json.loads(line) for line in journal.path.read_text().splitlines()]
        ops = [(e["op"], e.get("key")) for e in entries if e["op"] in ("intent", "applied")]
        assert ops == [("intent", "cut"), ("applied", "cut"), ("intent", "cut#2"), ("applied", "cut#2"),
                       ("intent", "cut#3"), ("applied", "cut#3")]
        assert await plane.recover_all() == []

    anyio.run(go)
    assert pods(world) == {"pod-3": []}
    recovered = [json.loads(line)["key"] for line in journal.path.read_text().splitlines()
                 if json.loads(line)["op"] == "recovered"]
    assert recovered == ["cut#3", "cut#2", "cut"]  # newest first
    assert read_journal(journal.path).open_intents == []


def test_stopping_a_fault_ends_its_reapplication(world: Path, tmp_path: Path):
    journal = Journal("p2", tmp_path / "journal")
    plane = plane_for(journal, world)

    async def go():
        await start(plane, world)
        replace_pod(world, "pod-1", "pod-2")
        await eventually(lambda: pods(world).get("pod-2") == ["drop"])
        await plane.stop("cut")
        replace_pod(world, "pod-2", "pod-3")
        await anyio.sleep(0.3)  # several polls: nothing re-applies a stopped fault
        assert pods(world) == {"pod-3": []}
        assert await plane.recover_all() == []

    anyio.run(go)
    assert [fault_of(r["key"]) for r in plane.reapplied] == ["cut"]


def test_no_new_pod_yet_waits_instead_of_reapplying_elsewhere(world: Path, tmp_path: Path):
    journal = Journal("p3", tmp_path / "journal")
    plane = plane_for(journal, world)

    async def go():
        await start(plane, world)
        world.write_text(json.dumps({}))  # deleted; the replacement is not running yet
        await anyio.sleep(0.3)
        assert plane.reapplied == [] and "no new running pod" in plane.persisted["cut"].pending
        world.write_text(json.dumps({"pod-2": []}))
        await eventually(lambda: pods(world).get("pod-2") == ["drop"])
        assert await plane.recover_all() == []

    anyio.run(go)


def test_cleanup_after_a_killed_run_recovers_the_reapplied_copies(world: Path, tmp_path: Path):
    directory = tmp_path / "journal"
    journal = Journal("p4", directory)
    journal.start(RunHeader(run_id="p4", problem_id="p", pid=999_999_999))
    plane = plane_for(journal, world)

    async def crash_after_reapplying():
        await start(plane, world)
        replace_pod(world, "pod-1", "pod-2")
        await eventually(lambda: pods(world).get("pod-2") == ["drop"])
        plane.halt_watcher()  # the process dies here: nothing is recovered

    anyio.run(crash_after_reapplying)
    assert pods(world) == {"pod-2": ["drop"]}
    results = cleanup_all(lambda header: None, directory=directory)
    assert [(r.recovered, r.errors, r.closed) for r in results] == [(["cut#2", "cut"], [], True)]
    assert pods(world) == {"pod-2": []}



def test_deleting_the_target_pod_many_times_never_sheds_the_fault(world: Path, tmp_path: Path, monkeypatch):
    """The attack: a gaming agent deletes the faulty pod again and again (``for i in $(seq 60);
    do kubectl delete pod ...``). The plane once stopped re-applying after 50 copies ("a target
    whose pods die every few seconds must not grow the journal without end"), so the 51st pod ran
    without the fault: a partition cured by restarts alone. A real cause outlives every restart;
    copies are only paced (here 30 a second, so the test is quick), never dropped."""
    monkeypatch.setattr(faultplane, "COPY_WINDOW_S", 1.0)
    journal = Journal("p5", tmp_path / "journal")
    plane = plane_for(journal, world)
    deletions = 60

    async def go():
        await start(plane, world)
        for n in range(1, deletions + 1):
            replace_pod(world, f"pod-{n}", f"pod-{n + 1}")
            try:
                await eventually(lambda n=n: pods(world).get(f"pod-{n + 1}") == ["drop"]
                                 and len(plane.reapplied) == n, timeout=10)
            except TimeoutError:
                pytest.fail(f"pod-{n + 1} (deletion {n}) runs without the fault: {plane.persisted['cut'].pending}")
        assert plane.in_place()[0]
        assert await plane.recover_all() == []

    anyio.run(go)
    assert pods(world) == {f"pod-{deletions + 1}": []}
    assert read_journal(journal.path).open_intents == []

# -- a fault that lives in the container goes with a container restart in the same pod ----------

def test_a_restarted_container_gets_a_container_scoped_fault_again(tmp_path: Path):
    """Measured: a geo container restarted (its liveness probe failed under the stress) came back
    without the stress-ng of its old cgroup, and the pod's uid never changed, so nothing re-applied
    it and the SLO oracle passed with the fault "in place". The carrier is the container."""
    import_path(FAKES)
    world = tmp_path / "containers.json"
    world.write_text(json.dumps({"pod-1": {"container": "containerd://a", "rules": []}}))

    def listed(_inj):
        return [{"metadata": {"uid": uid}, "status": {"containerStatuses": [
            {"name": "geo", "containerID": pod["container"], "state": {"running": {}}}]}}
            for uid, pod in json.loads(world.read_text()).items()]

    def restart_container(new_id: str) -> None:
        data = json.loads(world.read_text())
        data["pod-1"] = {"container": new_id, "rules": []}
        world.write_text(json.dumps(data))

    journal = Journal("p9", tmp_path / "journal")
    plane = FaultPlane(journal=journal, kube=None, app_namespace="app", run_id="p9", run_seed=1,
                       target_pods=listed, watch_interval=0.05)

    def rules() -> list[str]:
        return json.loads(world.read_text())["pod-1"]["rules"]

    async def go():
        await plane.start(key="cpu", kind="fault", injector="unit_container_rule", params={"file": str(world)},
                          target=Selector(kind="Deployment", name="geo"))
        assert rules() == ["stress"]
        assert plane.in_place()[0]
        restart_container("containerd://b")
        await eventually(lambda: rules() == ["stress"] and len(plane.reapplied) == 1)
        assert plane.reapplied[0]["pods"] == ["pod-1"]  # the same pod, planned on its new container
        assert plane.active["cpu#2"].intent.state["container"]["container_id"] == "containerd://b"
        assert plane.in_place()[0] and (await plane.verify("cpu", timeout=1)).ok
        await anyio.sleep(0.3)  # several polls: a copy that holds is not applied twice
        assert len(plane.reapplied) == 1
        assert await plane.recover_all() == []

    anyio.run(go)
    assert rules() == []


def test_a_restarting_container_is_not_given_the_fault_before_its_new_instance_runs(tmp_path: Path):
    """Measured live (``kill 1`` in geo): the watcher saw the old container stop and re-applied at
    once, but the pod's status still named the old container, so the copy was planned on (and put
    into) the dead one, and only a second copy reached the new container. The plane must wait
    until the planned container runs: one restart, one copy."""
    import_path(FAKES)
    world = tmp_path / "containers.json"
    world.write_text(json.dumps({"pod-1": {"container": "containerd://a", "rules": [], "state": "running"}}))

    def listed(_inj):
        return [{"metadata": {"uid": uid}, "status": {"containerStatuses": [
            {"name": "geo", "containerID": pod["container"], "state": {pod["state"]: {}}}]}}
            for uid, pod in json.loads(world.read_text()).items()]

    def set_container(container: str, state: str, rules: list[str] | None = None) -> None:
        data = json.loads(world.read_text())
        data["pod-1"].update(container=container, state=state, **({} if rules is None else {"rules": rules}))
        tmp = world.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(world)

    journal = Journal("p10", tmp_path / "journal")
    plane = FaultPlane(journal=journal, kube=None, app_namespace="app", run_id="p10", run_seed=1,
                       target_pods=listed, watch_interval=0.05)

    async def go():
        await plane.start(key="cpu", kind="fault", injector="unit_container_rule", params={"file": str(world)},
                          target=Selector(kind="Deployment", name="geo"))
        set_container("containerd://a", "terminated", rules=[])  # exited; the status still names it
        await anyio.sleep(0.4)  # several polls
        assert plane.reapplied == [], plane.reapplied
        assert "not running" in plane.persisted["cpu"].pending
        set_container("containerd://b", "running")
        await eventually(lambda: len(plane.reapplied) == 1)
        await anyio.sleep(0.3)
        assert [r["replaces"] for r in plane.reapplied] == ["cpu"]
        assert plane.active["cpu#2"].intent.state["container"]["container_id"] == "containerd://b"
        assert plane.in_place()[0] and (await plane.verify("cpu", timeout=1)).ok
        assert await plane.recover_all() == []

    anyio.run(go)
