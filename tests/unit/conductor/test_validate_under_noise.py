"""``sregym validate`` plays a problem as runs do: the problem's noise starts with the fault in
place and plays while the faulty system is graded, so noise that made a faulty system pass (or
noise that never ran) invalidates the problem; after recovery the oracle is graded with noise
stopped. A no-op control is graded after a window of noise."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

import sregym.conductor.episode as episode
import sregym.conductor.timeline as timeline
import sregym.conductor.validate as validate_mod
from sregym.core.problem import Problem
from sregym.core.record import CheckResult
from sregym.core.registry import import_path
from sregym.oracles import MITIGATION_ORACLES, MitigationOracle, mitigation_oracle
from sregym.oracles._api import NoParams

FAKES = Path(__file__).parent / "fakes"
WORLD: dict[str, Path] = {}

if "unit_world_good" not in MITIGATION_ORACLES.names():
    @mitigation_oracle("unit_world_good")
    class WorldGood(MitigationOracle):
        """Passes when no key of the world file is bad (what users would feel)."""

        Params = NoParams

        def check(self) -> CheckResult:
            world = json.loads(WORLD["file"].read_text())
            bad = sorted(k for k, v in world.items() if str(v).startswith("bad"))
            return CheckResult(name="unit_world_good", passed=not bad, message=f"bad: {bad}")


class Driver:
    def deploy(self, app, cluster, progress):
        return SimpleNamespace(namespace="app", prometheus_url=None, info=None, name="app")

    def health(self, app, cluster):
        return True, "healthy"

    def baseline(self, app, cluster, window):
        return {}


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import_path(FAKES)
    path = tmp_path / "world.json"
    path.write_text(json.dumps({"svc": "good"}))
    WORLD["file"] = path
    monkeypatch.setenv("UNIT_NOISE_FILE", str(path))
    monkeypatch.setenv("SREGYM_STATE", str(tmp_path / "state"))
    monkeypatch.setattr(episode, "ensure_hidden_namespace", lambda kube: None)
    monkeypatch.setattr(timeline, "FIRST_NOISE_WITHIN", 1.0)  # the first event within 1 s: a fast test
    return path


def problem(world: Path, *, no_op: bool = False) -> Problem:
    faults = [] if no_op else [{"id": "svc", "injector": "unit_file_value", "target": {"name": "svc"},
                                "params": {"file": str(world), "value": "bad-svc"}}]
    return Problem.model_validate({
        "id": "unit_noisy", "title": "t", "alert": "Search latency is far above its objective.", "app": {"name": "a"},
        "faults": faults, "no_op": no_op,
        "noise": {"types": ["unit_blip"], "per_window": 2, "window_seconds": 300, "duration_seconds": 60},
        "ground_truth": {"root_cause": "nothing or a bad svc value", "component": "svc", "mechanism": "m"},
        "oracles": {"mitigation": [{"name": "unit_world_good"}]},
        "difficulty": "easy", "tags": {"layer": "none" if no_op else "application", "fault_family": "f",
                                       "failure_mode": "no_op" if no_op else "error"}})


def validate(p: Problem, **kw):
    cluster = SimpleNamespace(kube=None, kubeconfig="k", context="c")
    # no pods to restart in this world: the restart step has its own live tests
    return anyio.run(lambda: validate_mod.validate_problem(p, cluster=cluster, driver=Driver(), grade_window=3,
                                                           verify_timeout=2, restart=False, **kw))


def test_noise_plays_while_the_faulty_system_is_graded_and_stops_before_recovery(world: Path):
    res = validate(problem(world), seed=1)
    assert res.ok, [(s.name, s.detail) for s in res.steps]
    faulty = next(s for s in res.steps if s.name == "mitigation oracle fails while faulty and noisy")
    assert "; noise: unit_blip#0@" in faulty.detail
    state = json.loads(world.read_text())
    assert state["noise_started"] >= 1 and state["active"] is False and state["svc"] == "good"
    assert (res.seed, res.noise) == (1, True)


def test_noise_that_makes_a_faulty_system_pass_invalidates_the_problem(world: Path):
    world.write_text(json.dumps({"svc": "good", "mask": "svc"}))  # the noise "repairs" svc while it runs
    res = validate(problem(world), seed=1)
    assert not res.ok
    assert res.steps[-1].name == "mitigation oracle fails while faulty and noisy" and not res.steps[-1].ok


def test_noise_off_plays_none(world: Path):
    res = validate(problem(world), noise=False)
    assert res.ok and "noise_started" not in json.loads(world.read_text())
    assert [s.name for s in res.steps][2] == "mitigation oracle fails while faulty"


def test_a_no_op_control_is_graded_after_a_window_of_noise(world: Path):
    res = validate(problem(world, no_op=True), seed=0)
    assert res.ok, [(s.name, s.detail) for s in res.steps]
    assert res.steps[1].name == "mitigation oracle passes with nothing to fix after noise"
    assert "noise: unit_blip#0@" in res.steps[1].detail
    assert json.loads(world.read_text())["active"] is False
