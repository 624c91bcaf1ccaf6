"""The resolved timeline: faults at their offsets, noise on a seeded schedule that repeats."""

from __future__ import annotations

from sregym.conductor.timeline import EARLY_WITHIN, FIRST_NOISE_WITHIN, LEAD_SECONDS, incident_onset, resolve_timeline
from sregym.core.problem import Problem


def make_problem(**noise) -> Problem:
    return Problem.model_validate({
        "id": "metastable", "title": "t", "alert": "Search latency is far above its objective.",
        "app": {"name": "hotel"},
        "faults": [
            {"id": "small_pool", "injector": "pool", "role": "vulnerability"},
            {"id": "surge", "injector": "load", "at": 30, "duration": 60, "role": "trigger"},
        ],
        "noise": {"per_window": 2, "window_seconds": 100, "duration_seconds": 20, **noise},
        "ground_truth": {"root_cause": "a pool too small for a retry storm", "component": "search",
                         "mechanism": "pool", "faulty_fault_ids": ["small_pool"]},
        "oracles": {"mitigation": [{"name": "slo"}]},
        "difficulty": "hard",
        "tags": {"layer": "application", "fault_family": "pool", "failure_mode": "latency"},
        "budgets": {"seconds": 300},
    })


def as_tuples(events):
    return [(e.at, e.action, e.kind, e.name, e.injector) for e in events]


def test_same_seed_gives_the_same_timeline():
    p = make_problem()
    assert as_tuples(resolve_timeline(p, 7, True)) == as_tuples(resolve_timeline(p, 7, True))


def test_different_seed_gives_a_different_noise_schedule():
    p = make_problem()
    assert as_tuples(resolve_timeline(p, 7, True)) != as_tuples(resolve_timeline(p, 8, True))


def test_faults_start_and_stop_at_their_offsets():
    events = resolve_timeline(make_problem(), 1, noise=False)
    assert as_tuples(events) == [
        (0.0, "start", "fault", "small_pool", "pool"),
        (30.0, "start", "fault", "surge", "load"),
        (90.0, "stop", "fault", "surge", "load"),
    ]
    assert incident_onset(events) == 30.0


def test_noise_fills_each_window_over_the_horizon_and_always_stops():
    # the hand edits' lead-in around the onset (see test_lead_in...) stays until recovery
    events = [e for e in resolve_timeline(make_problem(), 3, True) if e.kind == "noise" and "#lead" not in e.name]
    starts = [e for e in events if e.action == "start"]
    stops = {e.name: e.at for e in events if e.action == "stop"}
    # windows start at the onset (30 s) and run to last fault start + agent budget (330 s):
    # 3 windows of 100 s, 2 events each
    assert len(starts) == 6
    for w in range(3):
        assert sum(30 + w * 100 <= e.at < 30 + (w + 1) * 100 for e in starts) == 2
    assert all(abs(stops[e.name] - (e.at + 20)) < 1e-6 for e in starts)
    assert all(e.injector.startswith("noise_") for e in events)


def test_noise_off_or_zero_per_window_has_no_noise():
    assert all(e.kind == "fault" for e in resolve_timeline(make_problem(), 3, False))
    assert all(e.kind == "fault" for e in resolve_timeline(make_problem(per_window=0), 3, True))


def test_events_are_sorted_by_time():
    ats = [e.at for e in resolve_timeline(make_problem(), 11, True)]
    assert ats == sorted(ats)


def test_noise_is_there_from_the_start_of_the_agent_phase_for_every_seed():
    # a fast agent must meet noise too: the first event comes within FIRST_NOISE_WITHIN s of the
    # onset (when the agent is paged), and none plays before it, during the injection
    p = make_problem(window_seconds=300)
    firsts = set()
    for seed in range(50):
        events = resolve_timeline(p, seed, True)
        onset = incident_onset(events)
        starts = sorted(e.at for e in events if e.kind == "noise" and e.action == "start" and "#lead" not in e.name)
        assert onset <= starts[0] <= onset + FIRST_NOISE_WITHIN, (seed, starts[0])
        firsts.add(starts[0])
    assert len(firsts) > 40  # seeded, not a fixed offset


def test_a_horizon_shorter_than_the_first_noise_window_still_gets_early_noise():
    events = resolve_timeline(make_problem(window_seconds=300), 4, True, agent_seconds=20)
    starts = [e.at for e in events if e.kind == "noise" and e.action == "start" and "#lead" not in e.name]
    assert starts and all(30 <= at < 50 for at in starts)
    assert all(e.at < 50 for e in events if "#lead" in e.name and e.action == "start")  # the lead-in too


def test_lead_in_hand_edits_come_before_the_first_fault_after_the_faults_and_in_the_first_minute():
    for seed in range(30):
        events = resolve_timeline(make_problem(), seed, True)
        lead = [e for e in events if "#lead" in e.name and e.action == "start"]
        assert all(e.injector == "noise_manual_edit" for e in lead)
        assert 1 <= sum(-LEAD_SECONDS <= e.at < 0 for e in lead) <= 3  # before the first fault (at 0)
        assert sum(30 < e.at <= 30 + EARLY_WITHIN for e in lead) == 1  # in the agent's first minute
        assert sum(e.params.get("sort") == "spec" for e in lead) == 1
        assert not [e for e in events if "#lead" in e.name and e.action == "stop"]  # undone at recovery
        # at the onset, after the faults in the sorted timeline: the player plays them before the page
        at_onset = [i for i, e in enumerate(events) if "#lead" in e.name and e.at == 30.0]
        assert all(i > events.index(next(e for e in events if e.name == "surge")) for i in at_onset)
    assert not [e for e in resolve_timeline(make_problem(types=["pod_restart"]), 1, True) if "#lead" in e.name]
