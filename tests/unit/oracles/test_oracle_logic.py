"""Pure logic under the mitigation oracles: windows, field paths, conditions, policies, SLOs."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from oracles.quota import binding
from oracles.scheduling import unschedulable
from oracles.storage import parse_df, parse_read_all
from oracles.workload_health import bad_containers, not_terminating, restart_counts
from sregym.core.errors import ClusterError, UserInputError
from sregym.oracles._fields import MISSING, Condition, lookup
from sregym.oracles._netpol import Endpoint, denying_policies
from sregym.oracles._slos import Slo, baseline_value, slos_from, within
from sregym.oracles._window import sample_window, window_result


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def test_window_samples_from_start_to_end_and_one_bad_sample_fails():
    clock = FakeClock()
    results = iter([True, True, False, True, True, True, True])
    samples = sample_window(lambda: (next(results), {}), 20, 5, clock=clock, sleep=clock.sleep)
    assert [s.t for s in samples] == [0, 5, 10, 15, 20]
    res = window_result("x", samples)
    assert res.passed is False and res.evidence["passed_samples"] == 4
    assert window_result("x", samples, min_pass_fraction=0.8).passed is True


def sampled(outcomes: list[bool], window: float, interval: float, fraction: float | None,
            probe_seconds: float = 0.0) -> list:
    clock = FakeClock()
    results = iter(outcomes)

    def probe():
        clock.now += probe_seconds
        return next(results), {}

    return sample_window(probe, window, interval, min_pass_fraction=fraction, clock=clock, sleep=clock.sleep)


def test_a_window_that_can_no_longer_pass_stops_at_once_and_one_that_can_is_sampled_to_its_end():
    # all must pass: the first failure decides
    assert len(sampled([True, False] + [True] * 10, 60, 5, 1.0)) == 2
    # half must pass over at most 6 samples (20 s at 5 s): lost at the 4th failure, not before
    assert len(sampled([False] * 10, 20, 5, 0.5)) == 4
    # alternating may still pass: sampled to the end
    assert [s.t for s in sampled([True, False] * 5, 20, 5, 0.5)] == [0, 5, 10, 15, 20]
    # passing windows always run to their end
    assert [s.t for s in sampled([True] * 10, 20, 5, 1.0)] == [0, 5, 10, 15, 20]


def test_stopping_a_lost_window_early_never_changes_the_verdict():
    import random

    r = random.Random(7)
    for _ in range(3000):
        window, interval = r.choice([0, 3, 10, 20, 60, 120]), r.choice([1, 2.5, 5, 15])
        fraction = r.choice([1.0, 0.9, 0.7, 0.5, 0.2])
        outcomes = [r.random() < r.choice([0.1, 0.5, 0.9, 1.0]) for _ in range(200)]
        slow = r.choice([0.0, 0.4, 3.0])  # a probe takes time too
        full = sampled(outcomes, window, interval, None, slow)
        early = sampled(outcomes, window, interval, fraction, slow)
        assert early == full[:len(early)]
        assert window_result("x", early, fraction).passed == window_result("x", full, fraction).passed


def test_a_cluster_error_in_a_sample_is_a_failed_sample_not_a_crash():
    clock = FakeClock()

    def probe():
        raise ClusterError("pod gone")

    samples = sample_window(probe, 0, 5, clock=clock, sleep=clock.sleep)
    assert len(samples) == 1 and not samples[0].passed and samples[0].detail["error"] == "pod gone"


DEPLOY = {"spec": {"template": {"spec": {"containers": [
    {"name": "geo", "image": "geo:1", "env": [{"name": "DB_URL", "value": "db:5432"}],
     "ports": [{"containerPort": 8083}]}]}}},
    "data": {"app.properties": "a=1"}}


def test_field_paths_with_selectors_indexes_and_quoted_keys():
    assert lookup(DEPLOY, "spec.template.spec.containers[name=geo].env[name=DB_URL].value") == "db:5432"
    assert lookup(DEPLOY, "spec.template.spec.containers[0].ports[0].containerPort") == 8083
    assert lookup(DEPLOY, 'data["app.properties"]') == "a=1"
    assert lookup(DEPLOY, "spec.template.spec.containers[name=other].image") is MISSING
    with pytest.raises(UserInputError):
        lookup(DEPLOY, "spec..[")


def test_conditions_treat_numbers_and_strings_alike_and_absent_fields_carefully():
    assert Condition(equals="8083").holds(8083)[0]
    assert not Condition(not_equals=5433).holds("5433")[0]
    assert Condition.model_validate({"in": ["db:5432", "db.svc:5432"]}).holds("db:5432")[0]
    assert not Condition(equals="x").holds(MISSING)[0]
    assert Condition(not_equals="bad").holds(MISSING)[0]
    assert not Condition(exists=True, not_equals="bad").holds(MISSING)[0]
    assert not Condition(not_contains="timeout=1ms").holds("x\ntimeout=1ms")[0]
    with pytest.raises(ValueError):
        Condition()


def policy(name, ns, pod_selector, ingress=None, egress=None, types=None):
    spec = {"podSelector": pod_selector}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    if types:
        spec["policyTypes"] = types
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


SRC = Endpoint({"app": "frontend"}, "hotel", {"kubernetes.io/metadata.name": "hotel"})
DST = Endpoint({"app": "geo"}, "hotel", {"kubernetes.io/metadata.name": "hotel"}, named_ports={"grpc": 8083})


def test_network_policy_semantics():
    assert denying_policies([], SRC, DST, 8083) == []
    deny_all = policy("deny", "hotel", {}, types=["Ingress"])
    assert denying_policies([deny_all], SRC, DST, 8083) == ["ingress:hotel/deny"]
    allow_fe = policy("allow", "hotel", {"matchLabels": {"app": "geo"}},
                      ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "frontend"}}}],
                                "ports": [{"port": "grpc"}]}])
    assert denying_policies([deny_all, allow_fe], SRC, DST, 8083) == []
    assert denying_policies([deny_all, allow_fe], SRC, DST, 9000)  # other port stays denied
    other_ns = Endpoint({"app": "frontend"}, "other", {"kubernetes.io/metadata.name": "other"})
    assert denying_policies([deny_all, allow_fe], other_ns, DST, 8083)  # podSelector alone = same namespace
    egress_block = policy("eg", "hotel", {"matchLabels": {"app": "frontend"}}, egress=[], types=["Egress"])
    assert denying_policies([egress_block], SRC, DST, 8083) == ["egress:hotel/eg"]
    expr = policy("x", "hotel", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["geo"]}]},
                  types=["Ingress"])
    assert denying_policies([expr], SRC, DST, 8083) == ["ingress:hotel/x"]


def test_slo_comparison_against_baseline():
    rate = Slo("success_rate", "q", "success_rate")
    p95 = Slo("p95_latency", "q", "latency")
    kw = dict(rate_tolerance=0.02, latency_factor=1.5, latency_slack=0.05)
    assert within(rate, 0.985, 1.0, **kw)[0] and not within(rate, 0.97, 1.0, **kw)[0]
    assert within(p95, 0.19, 0.1, **kw)[0] and not within(p95, 0.21, 0.1, **kw)[0]
    assert not within(rate, None, 1.0, **kw)[0]  # no traffic is not healthy
    assert within(Slo("s", "q", "success_rate", objective=0.99), 0.995, None, **kw)[0]
    assert not within(rate, 1.0, None, **kw)[0]


def test_slos_come_from_descriptors_in_several_shapes():
    class App:
        slos = [{"name": "success_rate", "query": "sum(a)/sum(b)"}, {"name": "p95_latency", "promql": "hq"}]

    assert [(s.name, s.kind) for s in slos_from(App())] == [("success_rate", "success_rate"), ("p95_latency", "latency")]
    assert [s.query for s in slos_from({"slos": {"error_ratio": "e"}})] == ["e"]
    assert baseline_value({"slos": {"a": {"value": 0.5}}}, "a") == 0.5 and baseline_value({"a": 1}, "a") == 1.0


def test_quota_binds_at_hard_limit_and_within_margin():
    q = {"metadata": {"name": "q"}, "status": {"hard": {"pods": "4", "requests.cpu": "1", "services.loadbalancers": "0"},
                                              "used": {"pods": "4", "requests.cpu": "500m"}}}
    assert binding(q, 0.0, []) == ["q/pods used 4 of 4"]
    assert binding(q, 0.6, []) == ["q/pods used 4 of 4", "q/requests.cpu used 500m of 1"]
    assert binding(q, 0.0, ["requests.cpu"]) == []


def test_unschedulable_pods_after_grace_only():
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def pod(name, age):
        ts = (now - timedelta(seconds=age)).isoformat().replace("+00:00", "Z")
        return {"metadata": {"name": name}, "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": ts,
             "message": "0/1 nodes are available"}]}}

    assert unschedulable([pod("old", 60), pod("new", 5)], 20, now) == ["old: Unschedulable 0/1 nodes are available"]


def test_restart_counts_and_crash_loops_from_pod_status():
    pods = [{"metadata": {"uid": "u1", "name": "geo-1"}, "status": {"containerStatuses": [
        {"name": "geo", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}]
    assert restart_counts(pods) == {"u1/geo": 3}
    assert bad_containers(pods) == ["geo-1/geo: CrashLoopBackOff"]
    backoff = [{"metadata": {"uid": "u2", "name": "geo-2"}, "spec": {}, "status": {"containerStatuses": [
        {"name": "geo", "restartCount": 2, "state": {"terminated": {"exitCode": 3}}}]}}]
    assert bad_containers(backoff) == ["geo-2/geo: CrashLoop (exit 3, 2 restarts)"]


def test_a_terminating_pod_no_longer_counts():
    """After a fix rolls out, the old crash-looping pod may linger while it is deleted."""
    old = {"metadata": {"uid": "u1", "name": "rec-old", "deletionTimestamp": "2026-11-22T02:00:00Z"}, "spec": {},
           "status": {"containerStatuses": [{"name": "rec", "restartCount": 4, "state": {"terminated": {"exitCode": 137}}}]}}
    new = {"metadata": {"uid": "u2", "name": "rec-new"}, "spec": {},
           "status": {"containerStatuses": [{"name": "rec", "restartCount": 0, "state": {"running": {}}}]}}
    assert not_terminating([old, new]) == [new]
    assert bad_containers(not_terminating([old, new])) == []


def test_storage_output_parsing():
    assert parse_read_all("FAIL /d/1: dd: error reading '/d/1': Input/output error\nCOUNT 12\n") == (
        12, ["/d/1: dd: error reading '/d/1': Input/output error"], False)
    assert parse_read_all("MISSING /x\n")[2] is True
    used, free = parse_df("Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/x 1000 900 100 90% /d\n")
    assert used == 90.0 and free == 100 * 1024


def test_a_stuck_rollout_is_incomplete_even_while_old_pods_serve():
    from oracles.workload_health import rollout_incomplete

    base = {"kind": "Deployment", "metadata": {"name": "web", "generation": 2}, "spec": {"replicas": 1}}
    stuck = base | {"status": {"observedGeneration": 2, "updatedReplicas": 0, "availableReplicas": 1}}
    done = base | {"status": {"observedGeneration": 2, "updatedReplicas": 1, "availableReplicas": 1}}
    assert "0/1 replicas run the current spec" in rollout_incomplete(stuck)
    assert rollout_incomplete(done) == ""


def test_a_rollout_whose_new_pod_never_gets_ready_is_incomplete_while_the_old_one_serves():
    """Measured 2026-11-29 (test_order_fulfilment_live.py): worker with NATS_URL=nats://shop-queue:4223
    had its new pod created (updatedReplicas 1 of 1) but never ready, the old one available: the
    rollout counted complete and workload_health passed 2/2, so another wrong address passed it too.
    kubectl rollout status waits for both: old replicas gone, updated ones available."""
    from oracles.workload_health import rollout_incomplete

    base = {"kind": "Deployment", "metadata": {"name": "worker", "generation": 3}, "spec": {"replicas": 1}}
    stalled = base | {"status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1,
                                 "availableReplicas": 1, "unavailableReplicas": 1}}
    assert "1 old replica(s) still run" in rollout_incomplete(stalled)
    unready = base | {"status": {"observedGeneration": 3, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 0}}
    assert "0/1 updated replicas available" in rollout_incomplete(unready)
    done = base | {"status": {"observedGeneration": 3, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}}
    assert rollout_incomplete(done) == ""


def test_validation_waits_for_metric_windows_only_where_an_oracle_reads_one():
    from pathlib import Path

    from sregym.conductor.grading import symptom_lag
    from sregym.core.loader import load_problem_file

    problems = Path(__file__).parents[3] / "problems"
    # slo at a 30 s rate: the window, and one 2 s scrape of the load generator, before the rate covers the fault
    assert symptom_lag(load_problem_file(problems / "shop_retry_storm_after_cpu_spike.yaml").problem) == 32
    # ... and at a 10 s rate, 12 s
    assert symptom_lag(load_problem_file(problems / "hotel_frontend_user_partition.yaml").problem) == 12
    # live-state probes see a change at once
    assert symptom_lag(load_problem_file(problems / "hotel_geo_container_port.yaml").problem) == 0
    # the longest wins when a problem has both kinds
    assert symptom_lag(load_problem_file(problems / "hotel_search_rate_network_policy.yaml").problem) == 12
