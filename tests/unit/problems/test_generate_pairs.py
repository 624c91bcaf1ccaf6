"""``sregym generate``: viable (primitive, target) pairs from the app descriptors, and skeletons
that the schema refuses until an author fills every TODO."""

from __future__ import annotations

import pytest
import yaml

from sregym.conductor import generate as gen
from sregym.core.errors import ProblemFileError, UserInputError
from sregym.core.loader import load_catalog, load_problem_file


@pytest.fixture(scope="module")
def apps():
    return gen.load_apps()


@pytest.fixture(scope="module")
def pairs(apps):
    return gen.candidates(apps)


def refs(pairs, injector):
    return {c.target.ref for c in pairs if c.injector == injector}


def test_sector_errors_and_full_disks_only_target_persistent_stores(pairs):
    assert refs(pairs, "latent_sector_error") == {
        "hotel-reservation/StatefulSet/hotel-db", "online-shop/StatefulSet/shop-db",
        "online-shop/StatefulSet/shop-redis", "online-shop/StatefulSet/shop-queue",
        "event-pipeline/StatefulSet/pipeline-db"}
    assert refs(pairs, "disk_full") == refs(pairs, "latent_sector_error")


def test_password_rotation_only_targets_stores_with_a_credentials_secret(pairs):
    assert refs(pairs, "credential_rotation") == {
        "hotel-reservation/StatefulSet/hotel-db", "online-shop/StatefulSet/shop-db",
        "online-shop/StatefulSet/shop-redis", "event-pipeline/StatefulSet/pipeline-db",
        "event-pipeline/StatefulSet/pipeline-cache"}


def test_claims_are_moved_only_on_deployments_that_mount_one(pairs):
    # a StatefulSet's claim templates are immutable; the descriptors name a service's own claims
    assert refs(pairs, "pvc_problem") == {"online-shop/Deployment/web"}


def test_only_a_surge_touches_the_slo_load_generator(pairs):
    """The load generator is the app's users: a surge is more of them (shop_api_traffic_surge), in
    the load generators' namespace; any other primitive there would break the measurement, not the app."""
    assert refs(pairs, "load_surge") == {"hotel-reservation/Deployment/loadgen-hotel-reservation",
                                         "online-shop/Deployment/loadgen-online-shop",
                                         "event-pipeline/Deployment/loadgen-event-pipeline"}
    assert {c.injector for c in pairs if c.target.role == "loadgen"} == {"load_surge"}
    assert {c.target.namespace for c in pairs if c.target.role == "loadgen"} == {"observability"}


def test_a_surge_skeleton_targets_the_generator_in_its_namespace_and_asks_for_the_rate(apps, tmp_path):
    c = gen.find_candidate("load_surge", "online-shop/Deployment/loadgen-online-shop", apps)
    assert c.covered_by == () or "shop_api_traffic_surge" in c.covered_by
    covered = gen.covered_pairs(lp.problem for lp in load_catalog().problems.values())
    (surge,) = [k for k in gen.candidates(apps, ["load_surge"], covered) if k.target.ref == c.target.ref]
    assert "shop_api_traffic_surge" in surge.covered_by, "its unnamed load generator is the shop's"
    data = yaml.safe_load(gen.write_skeleton(c, tmp_path).read_text())
    # no name: the load generator of whichever namespace the app runs in (injectors/load_surge.py)
    assert data["faults"][0]["target"] == {"namespace": "observability", "kind": "Deployment"}
    assert data["faults"][0]["params"] == {"env": {"LOADGEN_RPS": "TODO"}}
    assert data["ground_truth"]["component"] == "TODO"  # where capacity runs out: the author's to say
    with pytest.raises(ProblemFileError):
        load_problem_file(gen.write_skeleton(c, tmp_path / "again"))


def test_kinds_follow_each_injectors_targets(pairs):
    assert refs(pairs, "config_value") == {"hotel-reservation/ConfigMap/hotel-settings",
                                           "online-shop/ConfigMap/shop-settings",
                                           "hotel-reservation/Secret/hotel-db", "online-shop/Secret/shop-db",
                                           "online-shop/Secret/shop-redis",
                                           "event-pipeline/ConfigMap/pipeline-settings",
                                           "event-pipeline/Secret/pipeline-db", "event-pipeline/Secret/pipeline-cache"}
    assert "hotel-reservation/Service/geo" in refs(pairs, "service_misconfig")
    assert not any(r.split("/")[1] == "Service" for r in refs(pairs, "env_var"))
    assert not [c for c in pairs if c.injector.startswith("noise_")]


def test_curated_problems_mark_the_pairs_they_use(apps):
    catalog = load_catalog()
    covered = gen.covered_pairs(lp.problem for lp in catalog.problems.values())
    pairs = gen.candidates(apps, ["latent_sector_error"], covered)
    shop_db = next(c for c in pairs if c.target.ref == "online-shop/StatefulSet/shop-db")
    assert "latent_sector_error" in shop_db.covered_by


def test_a_non_viable_pair_is_a_user_error_listing_the_viable_targets(apps):
    with pytest.raises(UserInputError) as e:
        gen.find_candidate("latent_sector_error", "hotel-reservation/Deployment/geo", apps)
    assert "hotel-reservation/StatefulSet/hotel-db" in (e.value.hint or "")
    with pytest.raises(UserInputError):
        gen.find_candidate("env_var", "geo", apps)
    with pytest.raises(UserInputError):
        gen.find_candidate("noise_pod_restart", "hotel-reservation/Deployment/geo", apps)


def test_a_skeleton_fails_validation_until_its_todos_are_filled(apps, tmp_path):
    c = gen.find_candidate("credential_rotation", "online-shop/StatefulSet/shop-redis", apps)
    path = gen.write_skeleton(c, tmp_path)
    assert path.name == "shop_shop_redis_credential_rotation.yaml"
    data = yaml.safe_load(path.read_text())
    assert data["faults"][0]["params"] == {"secret": "shop-redis"}  # known from the descriptor
    with pytest.raises(ProblemFileError) as e:
        load_problem_file(path)
    assert e.value.line is not None
    data.update(title="Cart errors", alert="Carts fail for every shopper since the api pod restarted.")
    data["ground_truth"].update(root_cause="The redis password changed on the server only.", mechanism="stale creds",
                                impact="carts fail")
    data["tags"].update(layer="application", failure_mode="auth_failure")
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ProblemFileError, match="mitigation"):  # still no mitigation oracle
        load_problem_file(path)
    data["oracles"]["mitigation"] = [{"name": "workload_health", "params": {"workloads": ["api"]}}]
    path.write_text(yaml.safe_dump(data))
    assert load_problem_file(path).problem.faults[0].injector == "credential_rotation"


def test_skeleton_refuses_to_overwrite_and_checks_the_file_name(apps, tmp_path):
    c = gen.find_candidate("env_var", "hotel-reservation/Deployment/geo", apps)
    gen.write_skeleton(c, tmp_path / "geo_env.yaml")
    with pytest.raises(UserInputError):
        gen.write_skeleton(c, tmp_path / "geo_env.yaml")
    with pytest.raises(UserInputError):
        gen.write_skeleton(c, tmp_path / "geo_env2.yaml", "other_id")
