"""examples/runbook_bandit.py's learner, on returns made up here (the live loop runs in the long tier)."""

import importlib.util
import random
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "runbook_bandit", Path(__file__).parents[3] / "examples" / "runbook_bandit.py")
bandit_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bandit_example)


def test_the_bandit_tries_every_entry_then_keeps_to_the_one_that_paid_per_alert():
    entries = list(bandit_example.runbook("tiny"))
    fix = {"alert A": entries[2], "alert B": entries[0]}
    bandit = bandit_example.RunbookBandit(entries, epsilon=0.0, rng=random.Random(0))
    for alert in ("alert A", "alert B"):
        picks = []
        for _ in range(len(entries) + 3):
            entry = bandit.pick(alert)
            picks.append(entry)
            bandit.learn(alert, entry, 1.0 if entry == fix[alert] else 0.1)
        assert set(picks[:len(entries)]) == set(entries)  # each tried once first
        assert picks[len(entries):] == [fix[alert]] * 3  # then the one that paid, for this alert


def test_every_runbook_entry_ends_by_submitting_and_names_the_namespace_it_is_given():
    for incident in bandit_example.INCIDENTS:
        for calls in bandit_example.runbook("shop-p1", incident).values():
            assert [c["tool"] for c in calls[-2:]] == ["submit_diagnosis", "submit_mitigation"]
            assert all("shop-p1" in c["arguments"] for c in calls if c["tool"] == "kubectl")


def test_the_lite_incident_is_a_lite_suite_problem_and_its_runbook_holds_its_fix():
    from sregym.apps.spec import load_app
    from sregym.core.loader import load_catalog

    lite = bandit_example.INCIDENTS["lite"]
    catalog = load_catalog()
    assert lite["problem"] in [p.id for p in catalog.suite_problems("lite")]
    problem = catalog.problem(lite["problem"]).problem
    assert (problem.app.namespace or load_app(problem.app.name).namespace) == lite["namespace"]
    patches = [c for calls in bandit_example.runbook(lite["namespace"], "lite").values() for c in calls
               if "patch" in c["arguments"]]
    assert len(patches) == 1 and problem.faults[0].target.name in patches[0]["arguments"]


class FakeIncidentEnv:
    """Stands in for the live env in this unit test only: the restore entry's patch is the fix."""

    def __init__(self):
        self.fixed, self.closed = False, False

    def reset(self, *, seed=None, options=None):
        self.fixed = False
        return {"text": "An alert fired: wrong greeting in `tiny`"}, {}

    def step(self, action):
        if action["tool"] == "kubectl" and "patch" in action["arguments"]:
            self.fixed = True
        if action["tool"] == "submit_mitigation":
            return {"text": "ok"}, (1.0 if self.fixed else 0.0), True, False, {"mitigation_passed": self.fixed}
        return {"text": "ok"}, 0.0, False, False, {}

    def close(self):
        self.closed = True


def test_the_loop_runs_both_policies_and_writes_returns_and_a_plot(tmp_path, monkeypatch):
    import json

    env = FakeIncidentEnv()
    monkeypatch.setattr(bandit_example.gym, "make", lambda *a, **k: env)
    results = bandit_example.main(["--episodes", "7", "--epsilon", "0", "--out", str(tmp_path)])
    assert env.closed and set(results) == {"bandit", "random pick"}
    bandit = results["bandit"]
    assert [r["mitigated"] for r in bandit[4:]] == [True] * 3  # after trying the 4 entries, the fix
    assert json.loads((tmp_path / "returns.json").read_text()) == results
    assert (tmp_path / "returns.png").stat().st_size > 1000
