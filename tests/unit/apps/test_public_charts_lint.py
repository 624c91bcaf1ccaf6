"""The public app charts lint offline and reference only upstream images."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from sregym.apps import load_app
from sregym.cluster.charts import template
from sregym.apps.spec import charts_root
from sregym.cluster.kube import helm_path

pytestmark = pytest.mark.usefixtures("helm")  # tests/unit/apps/conftest.py

PUBLIC = ["deathstarbench-hotel-reservation", "deathstarbench-social-network", "opentelemetry-demo"]


def test_the_three_public_charts_are_there():
    assert sorted(p.parent.name for p in (charts_root() / "public").glob("*/Chart.yaml")) == PUBLIC


@pytest.mark.parametrize("name", PUBLIC)
def test_public_chart_lints(name):
    lint = subprocess.run([helm_path(), "lint", str(load_app(name).chart)], capture_output=True, text=True, timeout=120)
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize("name", PUBLIC)
def test_public_chart_uses_upstream_images_and_has_no_slos(name):
    spec = load_app(name)
    assert spec.slos == [] and spec.workload is None
    docs = [d for d in yaml.safe_load_all(template(spec.chart, spec.namespace, {})) if d]
    images = {c["image"] for d in docs if d["kind"] == "Deployment" for c in d["spec"]["template"]["spec"]["containers"]}
    assert images and not any(i.startswith("sregym/") for i in images)
