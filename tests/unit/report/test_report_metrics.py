"""Metrics of hand-made records have the answers worked out by hand, intervals included."""

import pytest
from report_records import make_record, synthetic_suite

from sregym.report.metrics import aggregate, facts_of, group_metrics, run_facts


def one_group(records, **kw):
    return group_metrics(facts_of(records), {"agent": "x"}, **kw)


def test_all_successes_have_rate_one_and_interval_one_to_one():
    recs = [make_record(problem=f"p{p}", seed=s) for p in range(3) for s in range(2)]
    g = one_group(recs)
    for name in ("diagnosis", "mitigation", "e2e"):
        assert (g[name].value, g[name].lo, g[name].hi) == (1.0, 1.0, 1.0)
        assert g[name].n == 6 and g[name].problems == 3


def test_not_judged_diagnoses_are_left_out_not_failed():
    recs = [make_record(problem="p1", diagnosis=True), make_record(problem="p2", diagnosis=None, seed=1),
            make_record(problem="p3", diagnosis=False, seed=2)]
    g = one_group(recs)
    assert g["diagnosis"].value == pytest.approx(0.5)
    assert g["diagnosis"].n == 2
    assert g["e2e"].n == 2  # end to end needs a judged diagnosis too
    assert g["mitigation"].n == 3
    assert g.not_judged == 1


def test_framework_errors_count_in_error_rate_only():
    recs = [make_record(problem="p1"), make_record(problem="p2", status="error", mitigation=False, diagnosis=False)]
    g = one_group(recs)
    assert g["mitigation"].value == 1.0 and g["mitigation"].n == 1
    assert g["error_rate"].value == pytest.approx(0.5)
    assert g.completed == 1 and g.runs == 2


def test_conditional_mitigation_rates_split_on_the_diagnosis():
    recs = [
        make_record(problem="a", diagnosis=True, mitigation=True),
        make_record(problem="b", diagnosis=True, mitigation=False),
        make_record(problem="c", diagnosis=True, mitigation=True),
        make_record(problem="d", diagnosis=False, mitigation=True),
        make_record(problem="e", diagnosis=False, mitigation=False),
        make_record(problem="f", diagnosis=False, mitigation=False),
        make_record(problem="g", diagnosis=False, mitigation=False),
    ]
    g = one_group(recs)
    assert g["p_mit_given_diag_ok"].value == pytest.approx(2 / 3)
    assert g["p_mit_given_diag_wrong"].value == pytest.approx(1 / 4)
    assert g["e2e"].value == pytest.approx(2 / 7)


def test_premature_resolution_counts_failed_mitigations_the_agent_submitted():
    recs = [
        make_record(problem="a", mitigation=False, submit_mitigation=True),
        make_record(problem="b", mitigation=True, submit_mitigation=True),
        make_record(problem="c", mitigation=False, submit_mitigation=False),  # ran out of budget: not premature
    ]
    g = one_group(recs)
    assert g["premature_resolution_rate"].value == pytest.approx(0.5)
    assert g["premature_resolution_rate"].n == 2


def test_invalid_action_and_write_share_are_pooled_over_actions():
    recs = [
        make_record(problem="a", calls=(("kubectl", "get", True, False), ("kubectl", "delete", False, True))),
        make_record(problem="b", calls=(("kubectl", "get", True, False),) * 6 + (("logs", None, True, False),),
                    malformed_turns=1),
    ]
    g = one_group(recs)
    # a: 1 invalid of 2 calls; b: 1 malformed turn of 7 calls + 1 turn -> 2 / 10
    assert g["invalid_action_rate"].value == pytest.approx(2 / 10)
    assert g["write_share"].value == pytest.approx(1 / 9)
    assert g.tool_mix.by_verb == {"get": 7, "delete": 1}
    assert g.tool_mix.by_tool == {"kubectl": 8, "logs": 1}
    assert (g.tool_mix.reads, g.tool_mix.writes) == (8, 1)


def test_means_of_times_tokens_reward_and_coverage():
    recs = [make_record(problem="a", ttd_s=10, ttm_s=40, tokens=100, evidence_coverage=0.5,
                        reward={"diagnosis": 0.5, "mitigation": 0.25}, wrong_remediations=("x",)),
            make_record(problem="b", ttd_s=30, ttm_s=None, tokens=300, evidence_coverage=1.0,
                        reward={"diagnosis": 0.5, "mitigation": 0.5})]
    g = one_group(recs)
    assert g["ttd_s"].value == pytest.approx(20)
    assert g["ttm_s"].value == pytest.approx(40) and g["ttm_s"].n == 1
    assert g["tokens"].value == pytest.approx(200)
    assert g["evidence_coverage"].value == pytest.approx(0.75)
    assert g["reward"].value == pytest.approx((0.75 + 1.0) / 2)
    assert g.reward_terms == {"diagnosis": 0.5, "mitigation": 0.375}
    assert g["wrong_remediation_rate"].value == pytest.approx(0.5)


def test_every_interval_contains_its_estimate_and_rates_stay_in_unit_range():
    checked = 0
    for g in aggregate(facts_of(synthetic_suite()), ["agent", "difficulty"]):
        for name, est in g.metrics.items():
            if est.value is None:
                continue
            checked += 1
            assert est.lo <= est.value <= est.hi, (g.keys, name)
            if name in ("diagnosis", "mitigation", "e2e", "error_rate"):
                assert 0.0 <= est.lo and est.hi <= 1.0
    assert checked >= 20  # estimates were there to check, not all None


def test_aggregation_groups_by_every_requested_key():
    facts = facts_of(synthetic_suite(agents=("noop", "react"), problems=6, seeds=2))
    by_noise = aggregate(facts, ["agent", "noise"])
    assert [tuple(g.keys.values()) for g in by_noise] == [
        ("noop", "noise"), ("noop", "quiet"), ("react (m-1)", "noise"), ("react (m-1)", "quiet")]
    assert all(g.runs == 12 for g in by_noise)
    layers = {g.keys["layer"] for g in aggregate(facts, ["layer"])}
    assert layers == {"application", "kubernetes", "os", "network", "hardware", "load"}
    assert {g.keys["failure_mode"] for g in aggregate(facts, ["failure_mode"])} == {"crash", "latency", "errors"}


def test_aggregates_are_deterministic_for_a_seed():
    facts = facts_of(synthetic_suite(problems=4, seeds=2))
    a = [g.as_dict() for g in aggregate(facts, ["agent"], seed=3)]
    b = [g.as_dict() for g in aggregate(list(reversed(facts)), ["agent"], seed=3)]
    assert a == b


def test_oracle_runs_are_left_out_when_ranking():
    recs = [make_record(agent="oracle", kind="oracle"), make_record(agent="noop", seed=1)]
    assert [f.agent for f in facts_of(recs, ranked_only=True)] == ["noop"]
    assert run_facts(recs[0]).ranked is False


def test_reward_components_are_weighted_shares_and_negative_penalties():
    from sregym.core.record import Reward
    from sregym.report.metrics import reward_components

    # the shape sregym/oracles/_reward.py writes: diagnosis not judged, so its weight is dropped
    r = Reward(total=0.014286, terms={"evidence": 1.0, "mitigation": 0.0, "efficiency": 0.0, "positive": 0.214286,
                                      "penalty_premature_submission": 0.2, "penalty_invalid_actions": 0.0,
                                      "invalid_actions": 0.0, "budget_used": 0.4},
               weights={"evidence": 0.15, "diagnosis": 0.0, "mitigation": 0.45, "efficiency": 0.1,
                        "premature_submission": 0.2})
    parts = reward_components(r)
    assert parts == pytest.approx({"evidence": 0.15 / 0.7, "mitigation": 0.0, "efficiency": 0.0,
                                   "penalty_premature_submission": -0.2})
    assert sum(parts.values()) == pytest.approx(r.total, abs=1e-5)
