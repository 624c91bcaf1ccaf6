"""The episode's invariants, on a fake world (a JSON file stands for the app): whatever ends the
body (an error, a cancellation), the faults are recovered inside a cancellation shield, the
journal is closed only then, and a record is written with the status and error before the error
propagates as itself."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest
from test_validate_under_noise import Driver, problem, world  # noqa: F401 - world is a fixture

from sregym.conductor.episode import Episode
from sregym.conductor.journal import open_journals
from sregym.core.errors import ClusterError, FaultError
from sregym.core.record import RunRecord


class Kube:
    def server_version(self) -> str:
        return "v1.0.0"


def episode(world: Path, out: Path) -> Episode:
    cluster = SimpleNamespace(kube=Kube(), kubeconfig="k", context="c", provider="local")
    return Episode(problem(world), cluster=cluster, seed=1, noise=False, agent_seconds=5, driver=Driver(),
                   journal_dir=out / "journal", record_to=out / "runs")


def test_an_error_after_injection_is_recovered_recorded_and_raised_as_itself(world: Path, tmp_path: Path):
    ep = episode(world, tmp_path)

    async def play():
        async with ep:
            await ep.deploy()
            await ep.measure_baseline(1, require_healthy=True)
            await ep.inject()
            assert json.loads(world.read_text())["svc"] == "bad-svc"  # the fault is in place
            raise FaultError("the agent plane broke")

    with pytest.raises(FaultError, match="the agent plane broke"):
        anyio.run(play)
    assert json.loads(world.read_text())["svc"] == "good"
    assert open_journals(tmp_path / "journal") == []  # everything came off: closed
    record = RunRecord.model_validate_json((tmp_path / "runs" / f"{ep.run_id}.json").read_text())
    assert (record.status, record.error) == ("error", "the agent plane broke")
    assert record.mechanisms and "recover" in record.phases and record.namespace == "app"


def test_a_cancelled_episode_still_recovers_its_faults(world: Path, tmp_path: Path):
    ep = episode(world, tmp_path)

    async def play():
        with anyio.move_on_after(0.5):
            async with ep:
                await ep.deploy()
                await ep.inject()
                await anyio.sleep(30)

    anyio.run(play)
    assert json.loads(world.read_text())["svc"] == "good"
    assert open_journals(tmp_path / "journal") == []
    record = RunRecord.model_validate_json((tmp_path / "runs" / f"{ep.run_id}.json").read_text())
    assert (record.status, record.error) == ("aborted", "interrupted")


def test_a_fault_that_does_not_come_off_leaves_the_journal_open_for_cleanup(world: Path, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch):
    ep = episode(world, tmp_path)

    async def play():
        async with ep:
            await ep.deploy()
            await ep.inject()
            monkeypatch.setattr(ep.plane, "recover_all", _fails)

    anyio.run(play)
    [left] = open_journals(tmp_path / "journal")
    assert left.run_id == ep.run_id and [i.key for i in left.open_intents] == ["svc"]
    record = RunRecord.model_validate_json((tmp_path / "runs" / f"{ep.run_id}.json").read_text())
    assert record.status == "error" and "svc: still broken" in record.error


async def _fails() -> list[str]:
    return ["svc: still broken"]


class BrokenBaselineDriver(Driver):
    """Pods ready, users not served: the baseline's SLOs miss their objectives ``misses`` times."""

    def __init__(self, misses: int) -> None:
        self.misses, self.measured = misses, 0

    def baseline(self, app, cluster, window):
        self.measured += 1
        met = self.measured > self.misses
        value = 1.0 if met else 0.43
        return {"slos": {"success_rate": {"value": value, "objective": 0.99, "kind": "success_rate", "met": met}},
                "met": met}


def test_a_baseline_whose_slos_miss_their_objectives_is_never_what_a_run_is_graded_against(
        world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Measured in the anti-gaming matrix (2026-11-28): right after a fresh install, hotel search
    timed out on every request while every pod was ready; the baseline recorded success 0.43, and
    the slo oracle, which compares with the baseline, passed a cell while geo's CPU stress ran
    (26/29 samples). An app whose users are not served before the fault is no baseline."""
    from sregym.conductor import episode as episode_module
    monkeypatch.setattr(episode_module, "BASELINE_MET_WITHIN_S", 0.5)
    ep = episode(world, tmp_path)
    ep.driver = BrokenBaselineDriver(misses=10**6)

    async def play():
        async with ep:
            await ep.deploy()
            await ep.measure_baseline(1, require_healthy=True)

    with pytest.raises(ClusterError, match=r"not served before the fault.*success_rate 0\.43 .*objective 0\.99"):
        anyio.run(play)
    assert json.loads(world.read_text())["svc"] == "good"  # nothing was injected


def test_a_baseline_that_misses_once_is_measured_again_and_the_met_one_is_kept(world: Path, tmp_path: Path):
    ep = episode(world, tmp_path)
    ep.driver = BrokenBaselineDriver(misses=1)

    async def play():
        async with ep:
            await ep.deploy()
            return await ep.measure_baseline(1, require_healthy=True)

    baseline = anyio.run(play)
    assert baseline["met"] is True and baseline["slos"]["success_rate"]["value"] == 1.0
    assert ep.driver.measured == 2
