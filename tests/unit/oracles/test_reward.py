"""Evidence coverage, wrong remediations and the partial-credit reward on hand-made trajectories."""

from __future__ import annotations

import pytest

from sregym.core.problem import Budgets, GroundTruth
from sregym.core.record import CheckResult, DiagnosisGrade, MitigationGrade
from sregym.core.trajectory import ModelTurn, Submission, ToolCall, Trajectory
from sregym.oracles._actions import evidence_coverage, wrong_remediations
from sregym.oracles._reward import compute_reward, load_reward_weights

GT = GroundTruth(root_cause="geo's DATABASE_URL points at the wrong port", component="geo",
                 mechanism="misconfigured env var", scope=["geo", "frontend"],
                 evidence=["logs:geo", "config:deployment/geo", "metrics:postgres", "traces:frontend"])
WEIGHTS = load_reward_weights()
BUDGETS = Budgets(steps=40, seconds=900)


def kubectl(t: float, command: str, **kw) -> ToolCall:
    verb = command.split()[0]
    return ToolCall(t=t, tool="kubectl", arguments={"command": command}, verb=verb,
                    read_only=verb in ("get", "describe", "logs", "top"), **kw)


def traj(*calls: ToolCall, mitigation_at: float | None = None, malformed: int = 0) -> Trajectory:
    subs = [Submission(kind="mitigation", t=mitigation_at)] if mitigation_at is not None else []
    turns = [ModelTurn(t=0.0, malformed=True) for _ in range(malformed)]
    return Trajectory(tool_calls=list(calls), submissions=subs, model_turns=turns)


def test_evidence_coverage_counts_each_entry_once_by_kind_and_target():
    t = traj(
        kubectl(1, "logs deploy/geo -n hotel"),                                         # logs:geo
        kubectl(2, "logs geo-7d9f8c6b5-x2x9q -n hotel"),                                # logs:geo again
        kubectl(3, "get deployment geo -o yaml -n hotel"),                              # config:deployment/geo
        ToolCall(t=4, tool="query_metrics", arguments={"query": 'rate(pg_stat_x{service="postgres"}[1m])'}),
        ToolCall(t=5, tool="get_traces", arguments={"service": "search"}),              # wrong service
    )
    assert evidence_coverage(t, GT) == pytest.approx(3 / 4)


def test_evidence_needs_the_right_kind_and_a_successful_call():
    t = traj(kubectl(1, "get pods geo-7d9f8c6b5-x2x9q"),          # config of a pod, but no logs
             kubectl(2, "logs deploy/geo", error="forbidden"),    # failed: gathers nothing
             ToolCall(t=3, tool="get_logs", arguments={"service": "geography"}))  # another name
    assert evidence_coverage(t, GroundTruth(root_cause="x" * 10, component="geo", mechanism="m",
                                            evidence=["logs:geo"])) == 0.0


def test_writes_on_the_faulty_component_or_its_victims_are_not_wrong():
    t = traj(kubectl(1, "set env deployment/geo DATABASE_URL=postgres://db:5432"),
             kubectl(2, "rollout restart deployment frontend -n hotel"),
             kubectl(3, "delete pod geo-7d9f8c6b5-x2x9q -n hotel"),
             kubectl(4, "get pods -A"))
    assert wrong_remediations(t, GT) == []


def test_writes_on_healthy_components_and_blanket_writes_are_wrong():
    t = traj(kubectl(1, "rollout restart deployment/search -n hotel"),
             kubectl(2, "delete pods --all -n hotel"),
             kubectl(3, "scale deployment geo search --replicas=0"),
             kubectl(4, "label pods -l app=rate tier=x"),
             kubectl(5, "scale deployment postgres --replicas=2", invalid=True))  # refused: not an action
    wrong = wrong_remediations(t, GT)
    assert len(wrong) == 4
    assert "search" in wrong[0] and "*" in wrong[1] and "search" in wrong[2] and "geo," not in wrong[2]
    assert "rate" in wrong[3]


def test_apply_of_a_manifest_is_judged_by_the_objects_it_names():
    ok = ToolCall(t=1, tool="kubectl", verb="apply", read_only=False,
                  arguments={"command": ["apply", "-f", "-"], "stdin": "kind: Deployment\nmetadata:\n  name: geo\n"})
    bad = ToolCall(t=2, tool="kubectl", verb="apply", read_only=False,
                   arguments={"command": ["apply", "-f", "-"], "stdin": "kind: Service\nmetadata:\n  name: rate\n"})
    assert wrong_remediations(traj(ok, bad), GT) == [wrong_remediations(traj(bad), GT)[0]]


def good_grades(passed: bool = True):
    d = DiagnosisGrade(oracle="checklist_judge", judged=True, passed=passed, score=1.0 if passed else 0.0)
    m = MitigationGrade(passed=passed, checks=[CheckResult(name="slo", passed=passed),
                                                 CheckResult(name="workload_health", passed=True)])
    return d, m


def test_perfect_run_reward_and_terms():
    t = traj(kubectl(1, "logs deploy/geo"), kubectl(2, "get deploy geo -o yaml"),
             ToolCall(t=3, tool="query_metrics", arguments={"query": "up{job='postgres'}"}),
             ToolCall(t=4, tool="get_traces", arguments={"service": "frontend"}),
             kubectl(5, "set env deploy/geo DATABASE_URL=ok"), mitigation_at=90.0)
    d, m = good_grades()
    r = compute_reward(t, GT, d, m, BUDGETS, WEIGHTS)
    # efficiency: max(5/40 steps, 90/900 s) = 0.125 used
    assert r.terms["evidence"] == 1.0 and r.terms["budget_used"] == 0.125
    assert r.terms["efficiency"] == pytest.approx(0.875)
    assert r.total == pytest.approx(0.15 + 0.3 + 0.45 + 0.1 * 0.875)
    assert set(r.weights) >= {"evidence", "diagnosis", "mitigation", "efficiency", "premature_submission"}


def test_premature_submission_wrong_remediations_and_invalid_actions_are_penalised():
    t = traj(kubectl(1, "rollout restart deployment -n hotel"), kubectl(2, "delete pods --all"),
             mitigation_at=10.0, malformed=3)
    d, m = good_grades(passed=False)
    r = compute_reward(t, GT, d, m, BUDGETS, WEIGHTS)
    assert r.terms["penalty_premature_submission"] == 0.2
    assert r.terms["penalty_wrong_remediations"] == 0.2
    assert r.terms["penalty_invalid_actions"] == pytest.approx(0.06)
    assert r.terms["efficiency"] == 0.0  # failing fast is not efficient
    # positive: mitigation partial 0.5 * 1/2 checks = 0.25 -> 0.45*0.25 = 0.1125, minus 0.46 -> clamped at 0
    assert r.terms["mitigation"] == 0.25
    assert r.total == 0.0


def test_unjudged_diagnosis_is_dropped_and_weights_renormalised():
    t = traj(kubectl(1, "logs geo-7d9f8c6b5-x2x9q"), mitigation_at=900.0)
    d = DiagnosisGrade(oracle="checklist_judge", judged=False, errors=["no judge"])
    m = MitigationGrade(passed=True, checks=[CheckResult(name="slo", passed=True)])
    r = compute_reward(t, GT, d, m, BUDGETS, WEIGHTS)
    assert "diagnosis" not in r.terms and r.weights["diagnosis"] == 0.0
    # evidence 1/4, mitigation 1, efficiency 0 (whole time budget used); weights 0.15+0.45+0.1
    assert r.total == pytest.approx((0.15 * 0.25 + 0.45) / 0.7)
    zero = WEIGHTS.model_copy(update={"unmeasured": "zero"})
    assert compute_reward(t, GT, d, m, BUDGETS, zero).total == pytest.approx(0.15 * 0.25 + 0.45)


def test_reward_stays_in_unit_interval():
    d, m = good_grades()
    assert 0.0 <= compute_reward(Trajectory(), GT, d, m, BUDGETS, WEIGHTS).total <= 1.0


def test_objects_named_after_the_component_or_in_the_details_are_not_wrong():
    gt = GroundTruth(root_cause="a NetworkPolicy blocks frontend from geo", component="geo", mechanism="netpol",
                     details=["NetworkPolicy deny-geo-ingress"], scope=["geo", "frontend"])
    t = traj(kubectl(1, "delete networkpolicy deny-geo-ingress -n hotel"),
             kubectl(2, "patch configmap geo-config -p {}"),
             kubectl(3, "rollout restart deployment hotel-reservation-geo"),
             kubectl(4, "delete networkpolicy allow-dns -n hotel"))
    wrong = wrong_remediations(t, gt)
    assert len(wrong) == 1 and "allow-dns" in wrong[0]
