"""Shortcuts a gaming agent would take past the mitigation oracles, each judged by the oracle's
pure logic: a removed or loosened probe, a 2xx from the wrong process, a fixed ConfigMap with
pods still running the bad value, fake good counters from a pod the agent made."""

from __future__ import annotations

import copy
import glob
import json

import pytest
import yaml

from oracles.http_probe import HttpProbeParams, judge_line
from oracles.object_state import how_read, key_written_at, stale_containers
from oracles.workload_health import probe_problems
from sregym.cluster.charts import template
from sregym.apps.spec import load_app
from sregym.core.constants import OBSERVABILITY_NAMESPACE
from sregym.core.errors import UserInputError
from sregym.oracles._fields import Condition
from sregym.oracles._probes import weakened, workload_probes
from sregym.oracles._slos import checked_slos, render, slos_from

READY = {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5, "timeoutSeconds": 3, "failureThreshold": 2}
LIVE = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 3, "failureThreshold": 3}


def deployment(name: str = "api", **container_extra) -> dict:
    container = {"name": name, "image": "x", "readinessProbe": READY, "livenessProbe": LIVE, **container_extra}
    return {"kind": "Deployment", "metadata": {"name": name},
            "spec": {"template": {"spec": {"containers": [container]}}}}


def without(obj: dict, key: str) -> dict:
    out = copy.deepcopy(obj)
    out["spec"]["template"]["spec"]["containers"][0].pop(key)
    return out


BASELINE = {"Deployment/api": workload_probes(deployment())}


# -- readiness is evidence only while the probe is the chart's ----------------------------------

def test_removing_the_readiness_probe_fails_workload_health():
    problems = probe_problems(without(deployment(), "readinessProbe"), [], BASELINE)
    assert problems == ["Deployment/api/api readinessProbe removed (the chart defines one)"]


def test_a_pod_running_without_the_probe_fails_even_when_the_template_has_it():
    pod = {"metadata": {"name": "api-1"}, "spec": {"containers": [{"name": "api", "livenessProbe": LIVE}]}}
    assert probe_problems(deployment(), [pod], BASELINE) == [
        "pod/api-1/api readinessProbe removed (the chart defines one)"]


@pytest.mark.parametrize("change, why", [
    ({"failureThreshold": 100}, "failureThreshold 2 -> 100"),
    ({"periodSeconds": 300}, "periodSeconds 5 -> 300"),
    ({"httpGet": {"path": "/healthz", "port": "http"}}, "checks something else now"),
    ({"httpGet": None, "tcpSocket": {"port": "http"}}, "checks something else now"),
])
def test_loosening_or_repointing_the_readiness_probe_fails(change, why):
    probe = {k: v for k, v in {**READY, **change}.items() if v is not None}
    problems = weakened(BASELINE["Deployment/api"], workload_probes(deployment(readinessProbe=probe)), "d")
    assert len(problems) == 1 and why in problems[0]


def test_the_same_probe_with_defaults_spelled_out_or_a_stricter_one_passes():
    spelled = {**READY, "initialDelaySeconds": 0, "successThreshold": 1, "httpGet": {**READY["httpGet"], "scheme": "HTTP"}}
    stricter = {**READY, "failureThreshold": 1, "periodSeconds": 2}
    for probe in (spelled, stricter):
        assert weakened(BASELINE["Deployment/api"], workload_probes(deployment(readinessProbe=probe)), "d") == []


def test_a_liveness_probe_may_check_differently_but_not_vanish_or_loosen():
    # fixing hotel_profile_liveness_probe by pointing the planted TCP check at the right port
    tcp = {"tcpSocket": {"port": "http"}, "periodSeconds": 3, "timeoutSeconds": 1, "failureThreshold": 2}
    assert weakened(BASELINE["Deployment/api"], workload_probes(deployment(livenessProbe=tcp)), "d") == []
    slow = {**LIVE, "failureThreshold": 30}
    assert "failureThreshold 3 -> 30" in weakened(BASELINE["Deployment/api"], workload_probes(deployment(livenessProbe=slow)), "d")[0]
    assert "livenessProbe removed" in probe_problems(without(deployment(), "livenessProbe"), [], BASELINE)[0]


def test_a_workload_the_chart_does_not_define_is_not_compared():
    assert probe_problems(without(deployment("extra"), "readinessProbe"), [], BASELINE) == []


# -- an HTTP oracle checks the answer a working service gives ---------------------------------

def params(**kw) -> HttpProbeParams:
    return HttpProbeParams.model_validate({"url": "http://frontend.ns.svc:8080/hotels", **kw})


def test_any_2xx_from_the_wrong_process_does_not_pass():
    p = params(expect_json=["hotels"])
    stub = judge_line({"t": 0, "status": 200, "body": '{"status": "ok"}'}, p)
    html = judge_line({"t": 0, "status": 204, "body": ""}, p)
    real = judge_line({"t": 0, "status": 200, "body": '{"hotels": [{"id": "1"}]}'}, p)
    assert not stub.passed and "lacks hotels" in stub.detail["reason"]
    assert not html.passed and html.detail["reason"] == "HTTP 204"
    assert real.passed


def test_json_paths_index_lists_and_the_body_pattern_must_match():
    p = params(expect_json=["products.0.id"], expect_body=r'"cartItems": \d+')
    assert judge_line({"status": 200, "body": '{"products": [{"id": 3}], "cartItems": 0}'}, p).passed
    assert not judge_line({"status": 200, "body": '{"products": [], "cartItems": 0}'}, p).passed
    assert not judge_line({"status": 200, "body": '{"products": [{"id": 3}]}'}, p).passed
    assert not judge_line({"status": 200, "body": "<html>"}, p).passed


def test_the_probe_stops_once_its_answers_already_fail_the_check_and_never_while_it_may_pass():
    import json

    from oracles.http_probe import judged
    from sregym.oracles import lost

    p = params(expect_json=["hotels"], requests=10, min_pass_fraction=0.9)
    good = json.dumps({"t": 0, "status": 200, "body": '{"hotels": [1]}'})
    bad = json.dumps({"t": 0, "status": None, "error": "timed out", "body": ""})
    # one failure in ten may still pass at 0.9; a second cannot; a line being written is not an answer
    assert not lost(judged("\n".join([bad, good, good]), p), p.min_pass_fraction, p.requests)
    assert lost(judged("\n".join([bad, good, bad]), p), p.min_pass_fraction, p.requests)
    assert len(judged(good + "\n" + bad[:20], p)) == 1


def test_a_probe_must_declare_what_a_working_answer_looks_like():
    with pytest.raises(ValueError, match="say what a working answer looks like"):
        params()
    with pytest.raises(ValueError, match="not a regular expression"):
        params(expect_body="(")


# -- a config oracle checks what the running containers use --------------------------------------

CM = {"metadata": {"name": "settings", "creationTimestamp": "2026-01-01T10:00:00Z", "managedFields": [
    {"manager": "helm", "time": "2026-01-01T10:00:00Z", "fieldsV1": {"f:data": {"f:DB_PORT": {}, "f:LOG": {}}}},
    {"manager": "kubectl-patch", "time": "2026-01-01T10:30:00Z", "fieldsV1": {"f:data": {"f:DB_PORT": {}}}},
    {"manager": "noise", "time": "2026-01-01T10:40:00Z", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]}}


def pod(name: str, started: str, **container) -> dict:
    c = {"name": "app", "envFrom": [{"configMapRef": {"name": "settings"}}], **container}
    return {"metadata": {"name": name}, "spec": {"containers": [c]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "app", "state": {"running": {"startedAt": started}}}]}}


def test_the_key_was_written_by_whoever_owns_it_last_not_by_a_label_change():
    assert key_written_at(CM, "DB_PORT").isoformat() == "2026-01-01T10:30:00+00:00"
    assert key_written_at(CM, "LOG").isoformat() == "2026-01-01T10:00:00+00:00"


def test_pods_started_before_the_fix_still_run_the_bad_value():
    good = Condition.model_validate({"equals": "5432"})
    written = key_written_at(CM, "DB_PORT")
    old, new = pod("geo-old", "2026-01-01T10:20:00Z"), pod("geo-new", "2026-01-01T10:31:00Z")
    assert stale_containers([new], "settings", "DB_PORT", written, good) == []
    stale = stale_containers([old, new], "settings", "DB_PORT", written, good)
    assert len(stale) == 1 and stale[0].startswith("pod/geo-old/app started 10:20:00")


def test_the_value_a_container_really_runs_with_decides_when_it_can_be_read():
    """A pod that started before the key was last written may also have started before the key was
    ever broken (a fault that changed the ConfigMap without a restart, then recovered): its own
    environment, read from the container, decides; one that cannot be read is not judged."""
    good = Condition.model_validate({"equals": "5432"})
    written = key_written_at(CM, "DB_PORT")
    old = pod("geo-old", "2026-01-01T10:20:00Z")
    assert stale_containers([old], "settings", "DB_PORT", written, good, lambda p, c: "5432") == []
    stale = stale_containers([old], "settings", "DB_PORT", written, good, lambda p, c: "5433")
    assert len(stale) == 1 and "runs DB_PORT=5433" in stale[0]
    assert stale_containers([old], "settings", "DB_PORT", written, good, lambda p, c: None) == []  # unreadable


def test_a_container_that_sets_the_key_itself_is_judged_by_that_value():
    good = Condition.model_validate({"equals": "5432"})
    override = pod("geo", "2026-01-01T10:31:00Z", env=[{"name": "DB_PORT", "value": "5433"}])
    assert how_read(override["spec"]["containers"][0], "settings", "DB_PORT") == ("literal", "5433")
    assert "sets DB_PORT in its own env" in stale_containers([override], "settings", "DB_PORT", None, good)[0]
    other = pod("web", "2026-01-01T10:00:00Z", envFrom=[{"configMapRef": {"name": "another"}}])
    assert stale_containers([other], "settings", "DB_PORT", key_written_at(CM, "DB_PORT"), good) == []


# -- SLOs count only the conductor's load generator ---------------------------------------------

@pytest.mark.parametrize("app", ["hotel-reservation", "online-shop"])
def test_every_slo_query_selects_the_load_generator_in_the_namespace_the_agent_cannot_write(app):
    spec = load_app(app)
    for slo in spec.slos:
        for query in (slo.render("shop", "1m"), render(slo.query, "shop", "1m")):
            selectors = [s for s in query.split("{")[1:]]
            assert selectors, query
            for sel in selectors:
                assert f'namespace="{OBSERVABILITY_NAMESPACE}"' in sel and 'target_namespace="shop"' in sel, query
                assert 'job="kubernetes-pods"' in sel, query


@pytest.mark.parametrize("app", ["hotel-reservation", "online-shop"])
def test_the_load_generator_is_rendered_outside_the_app_namespace(app):
    spec = load_app(app)
    docs = [d for d in yaml.safe_load_all(template(spec.chart, spec.namespace, {})) if d]
    loadgen = [d for d in docs if "loadgen" in d["metadata"]["name"]]
    assert {d["kind"] for d in loadgen} == {"Deployment", "Service", "NetworkPolicy"}
    assert all(d["metadata"].get("namespace") == OBSERVABILITY_NAMESPACE for d in loadgen)
    deployment = next(d for d in loadgen if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["metadata"]["labels"]["target-namespace"] == spec.namespace
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TARGET_ADDR"].split(":")[0].endswith(f".{spec.namespace}.svc")
    # only Prometheus may call it (its /rate endpoint changes the load the SLOs are measured under)
    policy = next(d for d in loadgen if d["kind"] == "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}],
                                          "ports": [{"port": "http"}]}]
    # nothing else of the app leaves its namespace
    assert all(d["metadata"].get("namespace") in (None, spec.namespace) for d in docs if d not in loadgen)


# -- latency counts only answered requests: it is evidence only alongside the success rate ---------

def test_a_latency_slo_is_never_checked_without_the_success_rate():
    """The gaming move: make the slow service fail fast (scale it away, break its port) or hang past
    the client's timeout. Answered requests are fast again (errors answer quickly, timeouts are not
    answered), so a latency-only SLO passes while users get errors (measured: hotel_geo_cpu_pressure
    after restarting every pod, geo timing out, passed `only: [p95_latency_seconds]`)."""
    app = slos_from({"slos": [{"name": "success_rate", "query": "r", "kind": "success_rate"},
                              {"name": "p95_latency_seconds", "query": "l", "kind": "latency"},
                              {"name": "throughput", "query": "t", "kind": "throughput"}]})
    assert [s.name for s in checked_slos(app, ["p95_latency_seconds"])] == ["success_rate", "p95_latency_seconds"]
    assert [s.name for s in checked_slos(app, ["success_rate"])] == ["success_rate"]
    assert [s.name for s in checked_slos(app, [])] == ["success_rate", "p95_latency_seconds", "throughput"]
    with pytest.raises(UserInputError, match="success-rate"):  # nothing to vouch for the latency
        checked_slos([s for s in app if s.kind == "latency"], [])


# -- problems: an end-to-end check wherever readiness was the only evidence ----------------------

def test_no_problem_with_a_fault_is_graded_by_workload_health_alone():
    alone = []
    for path in sorted(glob.glob("problems/*.yaml")):
        doc = yaml.safe_load(open(path))
        names = {o["name"] for o in doc.get("oracles", {}).get("mitigation", [])}
        if names == {"workload_health"} and doc.get("faults") and doc["id"] not in ALLOWED_ALONE:
            alone.append(doc["id"])
    assert alone == [], json.dumps(alone)


# No user request reaches the worker (orders are fulfilled from a queue, out of band): its grade is
# its own health, with probes compared against the chart's.
ALLOWED_ALONE = {"shop_worker_pod_quota"}


# -- problems: a spec check is no proof that users are served ------------------------------------

# What users feel, through the real request path (the SLOs of the grader's load generator, or a
# probe of a working response).
USER_CHECKS = {"slo", "http_probe"}
NEGATIVE = {"not_equals", "not_contains"}


def spec_check_gaps(doc: dict) -> list[str]:
    """Why a problem's mitigation can pass while users are still failed, judged from its oracles:
    an ``object_field`` that asks only that the bad value be gone passes for any other bad value
    (a CPU limit of 11m for 10m, another wrong address), so it needs a check of what users feel
    (or, for an image or a probe, whose wrong values show in it, ``workload_health``); and a spec that is right but does not run (a Secret key that
    is wrong too, an image that cannot be pulled: the rollout sticks and the old pod serves on)
    passes any ``object_field``, so one on a workload needs ``workload_health`` (complete rollouts)
    or a check of what users feel."""
    oracles = doc.get("oracles", {}).get("mitigation", [])
    names = {o["name"] for o in oracles}
    gaps = []
    for o in oracles:
        if o["name"] != "object_field":
            continue
        params = o.get("params") or {}
        what = f"{params.get('kind')}/{params.get('name')} {params.get('field')}"
        # a wrong image or probe shows in the workload's health (it never runs, or never gets
        # ready, or restarts); a wrong address, limit or setting does not
        shows_in_health = ".image" in str(params.get("field")) or "Probe" in str(params.get("field"))
        if NEGATIVE & set(params.get("expect") or {}) and not USER_CHECKS & names \
                and not (shows_in_health and "workload_health" in names):
            gaps.append(f"{what}: any other wrong value passes, and nothing checks what users feel")
        if str(params.get("kind")).lower() in ("deployment", "statefulset", "daemonset") \
                and not ({"workload_health"} | USER_CHECKS) & names:
            gaps.append(f"{what}: a right spec that never runs (a stuck rollout) passes")
    return gaps


def test_a_spec_check_that_another_wrong_value_passes_is_caught():
    """The attack, on the catalog's own oracles: shop_api_cpu_throttled asked only that the API's
    CPU limit not be 10m, so an agent that set 11m passed while the API stayed throttled."""
    gamed = {"oracles": {"mitigation": [{"name": "object_field", "params": {
        "kind": "deployment", "name": "api", "field": "spec.template.spec.containers[name=api].resources.limits.cpu",
        "expect": {"not_equals": "10m"}}}]}}
    assert Condition.model_validate({"not_equals": "10m"}).holds("11m")[0]  # the gamed value passes the check
    assert len(spec_check_gaps(gamed)) == 2
    gamed["oracles"]["mitigation"].append({"name": "slo", "params": {}})
    assert spec_check_gaps(gamed) == []


def test_no_problem_is_passed_by_a_spec_that_is_still_wrong_or_never_runs():
    gaps = {}
    for path in sorted(glob.glob("problems/*.yaml")):
        doc = yaml.safe_load(open(path))
        if doc.get("faults") and spec_check_gaps(doc) and doc["id"] not in SPEC_CHECK_GAPS_OPEN:
            gaps[doc["id"]] = spec_check_gaps(doc)
    assert gaps == {}, json.dumps(gaps, indent=1)
    still_open = {pid for pid in SPEC_CHECK_GAPS_OPEN
                  if spec_check_gaps(yaml.safe_load(open(f"problems/{pid}.yaml")))}
    assert still_open == set(SPEC_CHECK_GAPS_OPEN), "closed: take it off the list"


# Known open (found 2026-11-29, reading the catalog as a gaming agent would): each needs its added
# checks validated live (noise on, two seeds) before it changes.
SPEC_CHECK_GAPS_OPEN: dict[str, str] = {}


def test_an_order_placed_now_must_be_fulfilled_for_the_worker_queue_to_pass():
    """shop_concurrent_pool_leak_and_worker_queue asked only that the worker's NATS_URL not be the
    fault's port, so NATS_URL=nats://shop-queue:4999 passed while orders stayed pending: its
    users' check is an order placed through the shop and fulfilled (or rejected) by the worker."""
    doc = yaml.safe_load(open("problems/shop_concurrent_pool_leak_and_worker_queue.yaml"))
    probes = [HttpProbeParams.model_validate(o["params"]) for o in doc["oracles"]["mitigation"]
              if o["name"] == "http_probe"]
    assert [p.follow.url for p in probes if p.follow] == ["http://api.$namespace.svc:8080/orders/{orderId}"]
    assert spec_check_gaps(doc) == []


def test_a_cpu_limit_still_throttling_fails_a_check_of_each_answers_latency():
    """Measured live (anti-gaming matrix, shop_api_cpu_throttled x another_wrong_value, 2026-11-29):
    an API CPU limit of 11m, throttled in 98% of its CPU periods, passed the problem's slo, which
    lets half its samples fail (16 of 29 passed), and the spec check and workload_health with it.
    Users' requests through the shop must each be answered in time, most of them."""
    doc = yaml.safe_load(open("problems/shop_api_cpu_throttled.yaml"))
    probes = [HttpProbeParams.model_validate(o["params"]) for o in doc["oracles"]["mitigation"]
              if o["name"] == "http_probe"]
    assert any(p.max_latency_seconds and p.max_latency_seconds <= 0.25 and p.min_pass_fraction >= 0.8
               and p.url.startswith("http://lb.") for p in probes), probes


def test_a_bad_probe_param_names_the_field():
    from oracles.http_probe import HttpProbe

    with pytest.raises(UserInputError, match="params"):
        HttpProbe.parse_params({"url": "http://x/", "expect_json": ["a"], "method": "DELETE"})


def test_a_container_running_the_bad_value_fails_whenever_it_started():
    """Measured in the anti-gaming matrix (hotel_cache_wrong_port x helm_rollback): after a helm
    rollback a rate pod still ran CACHE_PORT=11222 while configmap_value passed 4/4 samples: the key's
    write time (managed fields) is no proof of when the value changed, so a container the start time
    calls new is read too, when it can be."""
    good = Condition.model_validate({"equals": "5432"})
    written = key_written_at(CM, "DB_PORT")
    new = pod("geo-new", "2026-01-01T10:31:00Z")
    stale = stale_containers([new], "settings", "DB_PORT", written, good, lambda p, c: "5433")
    assert len(stale) == 1 and "runs DB_PORT=5433" in stale[0]
    assert stale_containers([new], "settings", "DB_PORT", written, good, lambda p, c: "5432") == []
