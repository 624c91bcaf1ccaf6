"""The public app charts (upstream images, not pullable here) pass a server-side dry run."""

from __future__ import annotations

import pytest

from sregym.apps import load_app
from sregym.cluster.charts import template

pytestmark = pytest.mark.cluster
PUBLIC = ["deathstarbench-hotel-reservation", "deathstarbench-social-network", "opentelemetry-demo"]


@pytest.mark.parametrize("name", PUBLIC)
def test_the_api_server_accepts_every_object_of_the_public_chart(cluster, name):
    manifests = template(load_app(name).chart, "default", {})
    applied = cluster.kube.kubectl("apply", "--dry-run=server", "-n", "default", "-f", "-", input=manifests,
                                   check=False, timeout=300)
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.count("(server dry run)") == manifests.count("\nkind: ")
