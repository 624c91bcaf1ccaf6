"""Install values and chart hashes: what makes a release reusable."""

from __future__ import annotations

from sregym.apps import load_app
from sregym.apps.driver import set_path
from sregym.apps.release import chart_hash, deep_merge, immutable_statefulsets


def test_deep_merge_overrides_nested_keys_and_keeps_the_rest():
    base = {"a": {"b": 1, "c": 2}, "d": 3}
    merged = deep_merge(base, {"a": {"b": 9}, "e": 4})
    assert merged == {"a": {"b": 9, "c": 2}, "d": 3, "e": 4}
    assert base == {"a": {"b": 1, "c": 2}, "d": 3}


def test_set_path_creates_nested_values():
    assert set_path({"loadgen": {"mix": "m"}}, "loadgen.rps", 12) == {"loadgen": {"mix": "m", "rps": 12}}


def test_chart_hash_is_stable_and_follows_values_and_templates(tmp_path):
    chart = tmp_path / "c"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("name: c\n")
    (chart / "templates" / "a.yaml").write_text("kind: ConfigMap\n")
    first = chart_hash(chart, {"x": 1})
    assert first == chart_hash(chart, {"x": 1})
    assert first != chart_hash(chart, {"x": 2})
    (chart / "templates" / "a.yaml").write_text("kind: Secret\n")
    assert first != chart_hash(chart, {"x": 1})


def test_chart_hash_ignores_image_sources_and_descriptor(tmp_path):
    chart = tmp_path / "c"
    (chart / "images" / "svc").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("name: c\n")
    before = chart_hash(chart, {})
    (chart / "images" / "svc" / "main.py").write_text("print('changed')\n")
    (chart / "sregym.yaml").write_text("name: c\n")
    assert chart_hash(chart, {}) == before


def test_repository_chart_hashes_differ_between_apps():
    hotel, shop = load_app("hotel-reservation"), load_app("online-shop")
    assert chart_hash(hotel.chart, {}) != chart_hash(shop.chart, {})


def test_statefulsets_an_upgrade_cannot_patch_are_named_from_helms_message():
    # as helm printed it when shop_redis_disk_full's memory volume was switched back to a claim
    err = ('Error: UPGRADE FAILED: cannot patch "shop-redis" with kind StatefulSet: StatefulSet.apps "shop-redis" '
           "is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
           "'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
           "'minReadySeconds' are forbidden")
    assert immutable_statefulsets(err) == ["shop-redis"]
    assert immutable_statefulsets('Error: UPGRADE FAILED: cannot patch "web" with kind Deployment: x') == []
