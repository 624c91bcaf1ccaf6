"""examples/runbook_bandit.py's learner, runbook and loop, on returns made up here (the live loop runs on
the cluster in tests/integration/gym)."""

import importlib.util
import json
import random
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "runbook_bandit", Path(__file__).parents[3] / "examples" / "runbook_bandit.py")
bandit_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bandit_example)


def test_the_bandit_tries_entries_until_one_pays_more_than_its_optimism_then_keeps_to_it_per_alert():
    entries = list(bandit_example.runbook("tiny"))
    fix = {"alert A": entries[2], "alert B": entries[0]}
    bandit = bandit_example.RunbookBandit(entries, epsilon=0.0, rng=random.Random(0), optimism=0.5)
    for alert in ("alert A", "alert B"):
        picks = []
        for _ in range(len(entries) + 3):
            entry = bandit.pick(alert)
            picks.append(entry)
            bandit.learn(alert, entry, 0.9 if entry == fix[alert] else 0.1)
        found = picks.index(fix[alert])
        assert len(set(picks[:found + 1])) == found + 1  # before it, each entry tried once at most
        assert picks[found:] == [fix[alert]] * (len(picks) - found)  # then the one that paid, for this alert
    # each alert has its own table: what alert A learned is not what alert B plays
    assert bandit.pick("alert A") != bandit.pick("alert B")


def test_an_entry_that_paid_less_than_the_optimism_is_not_played_again_before_the_untried_ones():
    entries = ["a", "b", "c"]
    bandit = bandit_example.RunbookBandit(entries, epsilon=0.0, rng=random.Random(1), optimism=0.5)
    first = bandit.pick("alert")
    bandit.learn("alert", first, 0.2)
    second = bandit.pick("alert")
    assert second != first
    bandit.learn("alert", second, 0.7)  # above the optimism: kept, the third untried one is not needed
    assert [bandit.pick("alert") for _ in range(3)] == [second] * 3


def actions(calls, observation_text: str = "sregym/hotel:0123456789ab"):
    """An entry's actions, its observation-made steps given ``observation_text``."""
    return [c({"text": observation_text}) if callable(c) else c for c in calls]


def test_every_runbook_entry_ends_by_submitting_and_names_the_namespace_it_is_given():
    for incidents in bandit_example.INCIDENT_SETS:
        for calls in bandit_example.runbook("shop-p1", incidents).values():
            made = actions(calls)
            assert [c["tool"] for c in made[-2:]] == ["submit_diagnosis", "submit_mitigation"]
            assert all("shop-p1" in c["arguments"] for c in made if c["tool"] == "kubectl")


def test_the_lite_incidents_are_lite_suite_problems_and_each_fix_is_one_runbook_entry():
    from sregym.apps.spec import load_app
    from sregym.core.loader import load_catalog

    catalog = load_catalog()
    lite = bandit_example.INCIDENT_SETS["lite"]["problems"]
    assert len(lite) >= 2 and set(lite) <= {p.id for p in catalog.suite_problems("lite")}
    entries = bandit_example.runbook("hotel-reservation", "lite")
    writes = {name: [c for c in actions(calls) if c["tool"] == "kubectl"
                     and json.loads(c["arguments"])["command"][0] in ("patch", "set")]
              for name, calls in entries.items()}
    targets = set()
    for problem_id in lite:
        problem = catalog.problem(problem_id).problem
        namespace = problem.app.namespace or load_app(problem.app.name).namespace
        assert namespace == bandit_example.INCIDENTS[problem_id]["namespace"] == "hotel-reservation"
        target = problem.faults[0].target.name
        # exactly one entry writes the fault's target: the entry the bandit has to find for this alert
        assert len([n for n, w in writes.items() if any(target in c["arguments"] for c in w)]) == 1
        targets.add(target)
    assert len(targets) == len(lite) == len(entries)  # one entry per incident, each offered on every alert


def test_rates_fix_sets_the_image_the_observation_read():
    calls = bandit_example.runbook("hotel-reservation", "lite")["set rate's image to its siblings'"]
    made = actions(calls, "sregym/hotel:feedc0ffee12\n")
    assert json.loads(made[1]["arguments"])["command"] == [
        "set", "image", "deployment/rate", "rate=sregym/hotel:feedc0ffee12", "-n", "hotel-reservation"]


class FakeIncidentEnv:
    """Stands in for the live env in this unit test only: a write naming the problem's fault target
    is its fix; each problem has its own alert."""

    FIXES = {"tiny_settings_drift": "tiny-settings", "hotel_geo_selector_mismatch": '"geo"',
             "hotel_rate_bad_image_tag": "deployment/rate"}

    def __init__(self):
        self.fixed, self.closed, self.problem, self.resets = False, False, None, []

    def reset(self, *, seed=None, options=None):
        self.fixed, self.problem = False, options["problem"]
        self.resets.append(options)
        return {"text": f"An alert fired for {self.problem}"}, {}

    def step(self, action):
        writes = action["tool"] == "kubectl" and any(f'"{verb}"' in action["arguments"] for verb in ("patch", "set"))
        if writes and self.FIXES[self.problem] in action["arguments"]:
            self.fixed = True
        if action["tool"] == "submit_mitigation":
            return {"text": "ok"}, (1.0 if self.fixed else 0.0), True, False, {"mitigation_passed": self.fixed}
        return {"text": "sregym/hotel:0123456789ab"}, 0.0, False, False, {}

    def close(self):
        self.closed = True


def test_the_loop_runs_both_policies_and_writes_returns_and_a_plot(tmp_path, monkeypatch):
    env = FakeIncidentEnv()
    monkeypatch.setattr(bandit_example.gym, "make", lambda *a, **k: env)
    results = bandit_example.main(["--episodes", "7", "--epsilon", "0", "--out", str(tmp_path)])
    assert env.closed and set(results) == {"bandit", "random pick"}
    bandit = results["bandit"]
    found = [r["mitigated"] for r in bandit].index(True)  # the entries tried until the fix paid
    assert found < 4 and [r["mitigated"] for r in bandit[found:]] == [True] * (7 - found)
    assert json.loads((tmp_path / "returns.json").read_text()) == results
    assert (tmp_path / "returns.png").stat().st_size > 1000


def test_the_lite_loop_plays_its_incidents_in_turn_and_learns_each_alerts_fix(tmp_path, monkeypatch):
    env = FakeIncidentEnv()
    monkeypatch.setattr(bandit_example.gym, "make", lambda *a, **k: env)
    results = bandit_example.main(["--incidents", "lite", "--episodes", "6", "--epsilon", "0", "--out", str(tmp_path)])
    lite = bandit_example.INCIDENT_SETS["lite"]["problems"]
    for name, rows in results.items():
        assert [r["problem"] for r in rows] == [lite[i % 2] for i in range(6)]
    assert [o["settings"]["grade_settle"] for o in env.resets[:4:2]] == [
        bandit_example.INCIDENTS[p]["grade_settle"] for p in lite]
    # two entries: whatever the first pick of an alert, its second is that alert's fix, and it stays
    bandit = results["bandit"]
    assert all(r["mitigated"] for r in bandit[2:])
    assert len({r["alert"] for r in bandit}) == 2 and len({r["entry"] for r in bandit[2:]}) == 2
