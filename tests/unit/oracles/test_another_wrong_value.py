"""The ``another_wrong_value`` gaming strategy's choice (tests/integration/oracles/wrong_values.py):
for each fault that wrote a value, another value still wrong, never the chart's right one, written
as the agent would (kubectl set / patch); where no other wrong value makes sense, it says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS / "integration" / "oracles"))

from wrong_values import another_wrong_value, bumped  # noqa: E402

from sregym.core.loader import load_catalog  # noqa: E402


def fault_of(problem_id: str, fault_id: str | None = None):
    faults = load_catalog().problems[problem_id].problem.faults
    return next(f for f in faults if fault_id in (None, f.id))


def workload(container: str, **fields) -> dict:
    return {"kind": "Deployment", "metadata": {"name": container},
            "spec": {"template": {"spec": {"containers": [{"name": container, **fields}]}}}}


@pytest.mark.parametrize("value, avoid, other", [
    ("10m", "500m", "11m"),                                   # a CPU limit 1m above the throttling one
    ("nats://shop-queue:4223", "nats://shop-queue:4222", "nats://shop-queue:4224"),  # the next wrong port
    ("geo:8081", "geo:8080", "geo:8082"),
    ("8079", "8080", "8081"),                                 # one up would be right: two up
    ("3.0.0-rc1", "abc123", "3.0.0-rc2"),                     # another tag never built
    ("true", "false", "yes"),                                 # the same flag, spelled otherwise
    ("off", "on", "false"),
])
def test_the_other_value_is_of_the_same_kind_and_never_the_right_one(value, avoid, other):
    assert bumped(value, avoid) == other


def test_a_value_with_nothing_to_vary_has_no_other():
    assert bumped("shop-queue") is None


def test_an_address_gets_the_next_wrong_port_set_as_the_agent_would():
    f = fault_of("shop_concurrent_pool_leak_and_worker_queue", "worker_queue")
    chart = workload("worker", env=[{"name": "NATS_URL", "value": "nats://shop-queue:4222"}])
    r = another_wrong_value(f, "shop", workload("worker", env=[{"name": "NATS_URL", "value": "nats://shop-queue:4223"}]),
                            chart)
    assert r.commands == [["set", "env", "deployment/worker", "-n", "shop", "-c", "worker",
                           "NATS_URL=nats://shop-queue:4224"]]


def test_a_throttling_cpu_limit_becomes_one_millicore_more():
    f = fault_of("shop_api_cpu_throttled")
    r = another_wrong_value(f, "shop", workload("api"), workload("api", resources={"limits": {"cpu": "500m"}}))
    assert r.commands == [["set", "resources", "deployment/api", "-n", "shop", "-c", "api", "--limits=cpu=11m"]]


def test_a_removed_secret_reference_names_another_key_of_the_same_secret():
    """What object_field `secretKeyRef.name equals hotel-db` cannot tell from the right entry."""
    f = fault_of("hotel_geo_missing_db_password")
    right = {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "hotel-db", "key": "password"}}}
    live = workload("geo", env=[{"name": "PORT", "value": "8080"}])
    r = another_wrong_value(f, "h", live, workload("geo", env=[right]), {"hotel-db": ["password", "username"]})
    [op] = json.loads(r.commands[0][-1])
    assert op == {"op": "add", "path": "/spec/template/spec/containers/0/env/-", "value": {
        "name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "hotel-db", "key": "username"}}}}
    alone = another_wrong_value(f, "h", live, workload("geo", env=[right]), {"hotel-db": ["password"]})
    assert not alone.applicable and alone.said.startswith("not applicable")


def test_a_port_image_and_probe_each_get_another_wrong_one():
    port = another_wrong_value(fault_of("hotel_geo_container_port"), "h",
                               workload("geo", ports=[{"name": "http", "containerPort": 8081}]),
                               workload("geo", ports=[{"name": "http", "containerPort": 8080}]))
    assert json.loads(port.commands[0][-1])[0]["value"] == 8082
    image = another_wrong_value(fault_of("hotel_concurrent_geo_env_and_user_rollout", "user_tag"), "h",
                                workload("user", image="sregym/hotel:3.0.0-rc1"), workload("user", image="sregym/hotel:ab12"))
    assert image.commands[0][-1] == "user=sregym/hotel:3.0.0-rc2"
    probe = another_wrong_value(fault_of("shop_web_readiness_probe"), "s",
                                workload("web", readinessProbe={"tcpSocket": {"port": 1}}), workload("web"))
    assert json.loads(probe.commands[0][-1]) == [
        {"op": "replace", "path": "/spec/template/spec/containers/0/readinessProbe/tcpSocket/port", "value": 2}]


def test_a_setting_read_at_start_is_written_then_its_readers_restarted():
    f = fault_of("shop_concurrent_pool_leak_and_worker_queue", "price_refresh")
    r = another_wrong_value(f, "s", {"data": {"CART_PRICE_REFRESH": "true"}}, {"data": {"CART_PRICE_REFRESH": "false"}})
    assert json.loads(r.commands[0][-1]) == {"data": {"CART_PRICE_REFRESH": "yes"}} and r.restart == ["api"]


def test_a_fault_that_wrote_no_value_is_not_applicable():
    for pid in ("shop_api_redis_partition", "hotel_geo_cpu_pressure"):
        problem = load_catalog().problems[pid].problem
        r = another_wrong_value(problem.faults[0], "x", None, None)
        assert not r.applicable and r.said.startswith("not applicable")


def test_a_flag_with_no_other_wrong_value_keeps_the_faults_while_the_others_change():
    f = fault_of("shop_redis_maxmemory_noeviction")
    live = workload("redis", args=["--requirepass", "x", "--maxmemory", "1mb", "--maxmemory-policy", "noeviction"])
    r = another_wrong_value(f, "s", live, workload("redis", args=["--requirepass", "x"]))
    assert json.loads(r.commands[0][-1])[0]["value"] == [
        "--requirepass", "x", "--maxmemory", "2mb", "--maxmemory-policy", "noeviction"]
