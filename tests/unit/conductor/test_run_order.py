"""The order of a run's steps (``run_problem`` over a stand-in episode and agent plane).

The agent plane (sandbox pod start and network fence: about 5 s of every gym reset) opens while
the app's release is checked, once the journal that records its processes and sandbox has
started; the agent is handed its task only after the release check, the baseline and the
injection, whatever finished first. A driver that cannot name the app's namespace and endpoints
before deploying gets the serial order."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

import sregym.conductor.run as run_mod
from sregym.conductor.progress import Phases
from sregym.core.problem import Budgets
from sregym.core.settings import RunSettings


def stand_ins(monkeypatch, *, early: bool, deploy_s: float = 0.2, session_s: float = 0.05):
    events: list[str] = []

    class Episode:
        def __init__(self, problem, **kw):
            self.phases = Phases()
            self.record = SimpleNamespace(grades=SimpleNamespace(), trajectory=None, baseline={})
            self.journal = SimpleNamespace(process=lambda pid, what: None, sandbox=lambda ns: None)
            self.app = None

        async def __aenter__(self):
            return self

        async def __aexit__(self, *exc):
            return False

        async def endpoints(self):
            events.append("endpoints")
            return SimpleNamespace(namespace="shop") if early else None

        def start_journal(self):
            events.append("journal")

        async def deploy(self):
            events.append("deploy start")
            await anyio.sleep(deploy_s)
            events.append("deploy end")
            self.app = SimpleNamespace(namespace="shop", reused=True)
            return self.app

        def open_fault_plane(self):
            events.append("fault plane")

        async def measure_baseline(self, window, require_healthy):
            events.append("baseline")

        async def inject(self):
            events.append("inject")

            async def play_rest():
                await anyio.sleep_forever()
            return SimpleNamespace(play_rest=play_rest)

        async def watch_agent_objects(self):
            events.append("watch")

        async def stop_noise(self):
            return []

    @asynccontextmanager
    async def agent_session(**kw):
        assert kw["app"].namespace == "shop"
        events.append("session opening")
        await anyio.sleep(session_s)
        events.append("session open")

        async def run(seed):
            events.append("agent")
            return "trajectory"
        yield SimpleNamespace(run=run)

    async def nothing(*a, **k):
        return None

    monkeypatch.setattr(run_mod, "Episode", Episode)
    monkeypatch.setattr(run_mod, "agent_session", agent_session)
    monkeypatch.setattr(run_mod, "grade_diagnosis", nothing)
    monkeypatch.setattr(run_mod, "grade_mitigation", nothing)
    monkeypatch.setattr(run_mod, "complete_grades", lambda grades, *a: grades)
    monkeypatch.setattr(run_mod, "agent_info", lambda *a: None)
    monkeypatch.setattr(run_mod, "budgets_for", lambda problem, settings: Budgets(steps=1, seconds=60))
    monkeypatch.setattr(run_mod, "forbidden_words", lambda problem: [])
    problem = SimpleNamespace(app=SimpleNamespace(name="shop"), faults=[], alert="a", ground_truth=None)
    settings = RunSettings(agent="random", baseline_window=1, grade_window=1)

    def play():
        return anyio.run(lambda: run_mod.run_problem(problem, settings, out_dir=Path("."), cluster=None,
                                                     driver=object(), runner=SimpleNamespace()))
    return events, play


def test_the_agent_plane_opens_alongside_the_release_check_after_the_journal(monkeypatch):
    events, play = stand_ins(monkeypatch, early=True)
    assert play().trajectory == "trajectory"
    assert events.index("journal") < events.index("session opening") < events.index("deploy end")
    assert events.index("deploy start") < events.index("session open") < events.index("deploy end")
    # the agent only after the release check, the baseline and the faults
    assert events.index("agent") > max(events.index(e) for e in ("deploy end", "baseline", "inject", "watch"))


@pytest.mark.parametrize("session_s", [0.0, 0.4])
def test_the_agent_waits_for_the_incident_whichever_finishes_first(monkeypatch, session_s):
    events, play = stand_ins(monkeypatch, early=True, session_s=session_s)
    play()
    assert events.index("agent") > max(events.index(e) for e in ("session open", "inject", "watch"))


def test_a_driver_that_cannot_name_the_endpoints_first_gets_the_serial_order(monkeypatch):
    events, play = stand_ins(monkeypatch, early=False)
    play()
    assert events.index("deploy end") < events.index("session opening")
    assert events.index("journal") < events.index("session opening")
