"""The app descriptors (charts/<app>/sregym.yaml) load, are consistent with their charts, and
errors in a descriptor name the file and field."""

from __future__ import annotations

import pytest
import yaml

from sregym.apps import list_apps, load_app
from sregym.apps.spec import SloSpec
from sregym.core.errors import UnknownNameError, UserInputError

OUR_APPS = ["hotel-reservation", "online-shop", "event-pipeline"]


@pytest.mark.parametrize("name", OUR_APPS)
def test_our_apps_have_workload_two_slos_and_closed_topology(name):
    spec = load_app(name)
    assert spec.name == name and spec.namespace == name
    assert spec.workload is not None and spec.workload.rps > 0 and abs(sum(spec.workload.mix.values()) - 1) < 1e-9
    assert {s.kind for s in spec.slos} == {"success_rate", "latency"}
    known = {s.name for s in spec.services} | {d.name for d in spec.datastores}
    assert all(set(s.depends_on) <= known for s in spec.services)
    assert any(d.engine == "postgresql" and d.persistent for d in spec.datastores)
    assert (spec.chart / "Chart.yaml").is_file()


def test_hotel_has_the_deathstarbench_services():
    services = {s.name for s in load_app("hotel-reservation").services}
    assert services == {"frontend", "search", "geo", "rate", "profile", "recommendation", "reservation", "user"}


@pytest.mark.parametrize("name", OUR_APPS)
def test_workload_mix_matches_chart_default_mix(name):
    spec = load_app(name)
    values = yaml.safe_load((spec.chart / "values.yaml").read_text())
    assert yaml.safe_load(values["loadgen"]["mix"]) == spec.workload.mix
    assert values["loadgen"]["rps"] == spec.workload.rps
    assert set(spec.images) <= set(values["images"])


def test_slo_query_is_rendered_for_namespace_and_window():
    slo = load_app("online-shop").slo("success_rate")
    query = slo.render("shop-2", "90s")
    assert 'namespace="shop-2"' in query and "[90s]" in query and "$" not in query


def test_slo_direction_follows_kind():
    rate = SloSpec(name="ok", kind="success_rate", objective=0.99, query="q")
    latency = SloSpec(name="p95", kind="latency", objective=0.5, query="q")
    assert rate.met_by(0.995) and not rate.met_by(0.98)
    assert latency.met_by(0.2) and not latency.met_by(0.7)
    assert not rate.met_by(None) and not latency.met_by(None)


def test_unknown_app_suggests_close_names():
    with pytest.raises(UnknownNameError) as err:
        load_app("hotel-reservations")
    assert "hotel-reservation" in str(err.value)


def test_chart_without_descriptor_is_an_app_without_slos(tmp_path):
    (tmp_path / "plain_chart").mkdir()
    (tmp_path / "plain_chart" / "Chart.yaml").write_text("apiVersion: v2\nname: plain-chart\nversion: 0.1.0\n")
    spec = load_app("plain_chart", tmp_path)
    assert spec.namespace == "plain-chart" and spec.slos == [] and spec.workload is None
    assert "plain_chart" in list_apps(tmp_path)


def test_bad_descriptor_error_names_file_and_field(tmp_path):
    chart = tmp_path / "broken"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: broken\nversion: 0.1.0\n")
    raw = yaml.safe_load((load_app("online-shop").chart / "sregym.yaml").read_text())
    raw["name"] = "broken"
    raw["slos"][0]["objective"] = "high"
    (chart / "sregym.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(UserInputError) as err:
        load_app("broken", tmp_path)
    assert str(chart / "sregym.yaml") in str(err.value) and "slos.0.objective" in str(err.value)


def test_dependency_on_unknown_component_is_refused(tmp_path):
    chart = tmp_path / "loose"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: loose\nversion: 0.1.0\n")
    (chart / "sregym.yaml").write_text(
        "name: loose\nnamespace: loose\nservices:\n  - {name: a, depends_on: [nowhere]}\n")
    with pytest.raises(UserInputError, match="nowhere"):
        load_app("loose", tmp_path)
