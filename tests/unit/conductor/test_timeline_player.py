"""Playing a timeline against the fault plane: offsets, verification, triggers removed after their
duration, and failures (a fault that never takes effect is fatal; noise that fails is recorded)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.journal import Journal, read_journal
from sregym.conductor.scheduler import TimelinePlayer
from sregym.conductor.timeline import fault_events, incident_onset
from sregym.core.errors import FaultError
from sregym.core.problem import FaultSpec, Problem
from sregym.core.record import TimelineEvent
from sregym.core.registry import import_path

FAKES = Path(__file__).parent / "fakes"


@pytest.fixture()
def world(tmp_path: Path) -> Path:
    import_path(FAKES)
    path = tmp_path / "world.json"
    path.write_text(json.dumps({"vuln": "good", "trigger": "good"}))
    return path


def fault(fid: str, world: Path, **kw) -> FaultSpec:
    takes_effect = kw.pop("takes_effect", True)
    return FaultSpec(id=fid, injector="unit_file_value", target={"name": fid},
                     params={"file": str(world), "value": f"bad-{fid}", "takes_effect": takes_effect}, **kw)


def player_for(tmp_path: Path, faults: list[FaultSpec], events: list[TimelineEvent], **kw) -> TimelinePlayer:
    journal = Journal("r", tmp_path / "journal")
    plane = FaultPlane(journal=journal, kube=None, app_namespace="app", run_id="r", run_seed=5)
    return TimelinePlayer(plane, faults, events, verify_timeout=kw.pop("verify_timeout", 2.0), **kw)


def fault_events_for(faults: list[FaultSpec]) -> list[TimelineEvent]:
    """The start/stop events of these faults (only ``faults`` matters to ``fault_events``)."""
    return sorted(fault_events(Problem.model_construct(faults=faults)), key=lambda e: e.at)


def read(world: Path) -> dict:
    return json.loads(world.read_text())


def test_metastable_timeline_vulnerability_then_trigger_then_trigger_removed(world: Path, tmp_path: Path):
    faults = [fault("vuln", world), fault("trigger", world, at=0.3, duration=0.4)]
    events = fault_events_for(faults)
    player = player_for(tmp_path, faults, events)
    seen = {}

    async def go():
        start = time.monotonic()
        await player.play_until(incident_onset(events))
        seen["onset"] = (time.monotonic() - start, read(world))
        await player.play_rest()
        seen["after"] = read(world)
        await player.plane.recover_all()

    anyio.run(go)
    took, state = seen["onset"]
    assert 0.3 <= took < 1.5
    assert state == {"vuln": "bad-vuln", "trigger": "bad-trigger"}
    assert seen["after"] == {"vuln": "bad-vuln", "trigger": "good"}  # trigger removed, vulnerability stays
    assert read(world) == {"vuln": "good", "trigger": "good"}
    assert all(e.ok and e.done_at is not None and e.done_at >= e.at for e in events)
    assert [e.mechanism for e in events if e.action == "start"] == ["kubernetes-api", "kubernetes-api"]
    assert read_journal(player.plane.journal.path).open_intents == []


def test_a_fault_that_never_takes_effect_stops_the_run(world: Path, tmp_path: Path):
    faults = [fault("vuln", world, takes_effect=False)]
    events = fault_events_for(faults)
    player = player_for(tmp_path, faults, events, verify_timeout=0.5)
    with pytest.raises(FaultError, match="did not take effect"):
        anyio.run(player.play_until, 0.0)
    assert events[0].ok is False and "did not take effect" in events[0].error
    # The intent was journaled before inject, so it stays open until recovered.
    assert [i.key for i in read_journal(player.plane.journal.path).open_intents] == ["vuln"]


def test_noise_that_fails_is_recorded_and_the_run_goes_on(world: Path, tmp_path: Path):
    events = [TimelineEvent(at=0.0, action="start", kind="noise", name="ghost#0", injector="noise_ghost"),
              TimelineEvent(at=0.1, action="start", kind="noise", name="blip#1", injector="unit_file_value")]
    notes: list[str] = []
    player = player_for(tmp_path, [], events, note=notes.append,
                        noise_params={"file": str(world), "value": "noisy", "duration": 5, "exclude": ["vuln"]})
    anyio.run(player.play_rest)
    assert events[0].ok is False and "unknown injector 'noise_ghost'" in events[0].error
    assert events[1].ok is True
    assert any("ghost#0" in n for n in notes)
    stopped = anyio.run(player.stop_noise)
    assert stopped == [] and read(world).get("vuln") == "good"


def test_noise_without_a_stop_event_outlives_stop_noise_and_plays_in_real_time_before_offset_zero():
    """The hand edits leading in to the incident stay through grading (their undo would roll pods
    under the grade) and come off in the recover phase; events before offset 0 wait their turn."""
    from types import SimpleNamespace

    class Plane:
        def __init__(self):
            self.active = {k: SimpleNamespace(intent=SimpleNamespace(kind="noise"), recovered=False)
                           for k in ("manual_edit#lead0", "pod_restart#0")}
            self.stopped: list[str] = []

        async def stop(self, key):
            self.stopped.append(key)

    events = [TimelineEvent(at=-0.3, action="start", kind="noise", name="manual_edit#lead0", injector="x"),
              TimelineEvent(at=0.0, action="start", kind="noise", name="pod_restart#0", injector="y"),
              TimelineEvent(at=9.0, action="stop", kind="noise", name="pod_restart#0", injector="y")]
    plane = Plane()
    player = TimelinePlayer(plane, [], events)
    fired: list[float] = []

    async def fire(ev):
        fired.append(time.monotonic())

    player._fire = fire
    start = time.monotonic()
    anyio.run(player.play_until, 0.0)
    assert len(fired) == 2 and fired[1] - start >= 0.25  # offset 0 came 0.3 s after the lead-in's start
    assert anyio.run(player.stop_noise) == [] and plane.stopped == ["pod_restart#0"]
