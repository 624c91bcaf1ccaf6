"""The SLO baseline measured by one process is reused by the next one (each `sregym run` and
`sregym validate` is a process of its own) on the real cluster: the second process does not wait
out the baseline window, keys what it reads by the live namespace's UID, and takes the numbers the
first measured from the real Prometheus. The unit tests (tests/unit/apps/test_baseline_reuse.py)
hold every case where the kept baseline must not be reused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from sregym.apps import app_driver
from sregym.core.problem import AppRef

pytestmark = pytest.mark.cluster

NAMESPACE = "online-shop"

# What a second `sregym validate` does before its first step, in a process of its own.
SECOND_PROCESS = """
import json, sys, time
from pathlib import Path
from sregym.apps import app_driver
from sregym.cluster.providers import current_cluster
from sregym.core.problem import AppRef
cluster = current_cluster(Path(sys.argv[1]), None)
driver = app_driver()
app = driver.deploy(AppRef(name="online-shop", namespace=sys.argv[2]), cluster)
start = time.monotonic()
base = driver.baseline(app, cluster, 10)
print(json.dumps({"reused": app.reused, "seconds": time.monotonic() - start, "measured": base.get("measured"),
                  "slos": base["slos"]}))
"""


def test_the_next_process_reuses_the_baseline_this_one_measured(cluster, tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SREGYM_STATE", str(state))
    driver = app_driver()
    app = driver.deploy(AppRef(name="online-shop", namespace=NAMESPACE), cluster)  # reused when undrifted
    start = time.monotonic()
    first = driver.baseline(app, cluster, 10)
    waited = time.monotonic() - start
    assert first["met"] is True and waited >= 20, first  # the shortest meaningful rate window, waited out
    uid = cluster.kube.core.read_namespace(NAMESPACE).metadata.uid
    assert [p.name for p in (state / "baselines").iterdir()] == [f"{uid}.json"]

    proc = subprocess.run([sys.executable, "-c", SECOND_PROCESS, str(cluster.kubeconfig), NAMESPACE],
                          env={**os.environ, "SREGYM_STATE": str(state)}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    second = json.loads(proc.stdout.strip().splitlines()[-1])
    assert second["reused"] is True
    assert second["measured"].startswith("reused: measured") and second["seconds"] < 10, second
    assert second["slos"] == json.loads(json.dumps(first["slos"]))  # the first process's numbers


def test_a_baseline_taken_while_users_are_not_served_is_refused_not_graded_against(cluster, tmp_path, monkeypatch):
    """Every pod ready, no shopper served (the web tier's calls to api go to a Service that selects
    no pod): the baseline is measured again, then refused with what it missed. Graded against, it
    would have let the slo oracle pass a fault still in place (the anti-gaming matrix, 2026-11-28)."""
    import anyio

    from sregym.conductor.episode import baseline_meeting_objectives
    from sregym.core.errors import ClusterError

    monkeypatch.setenv("SREGYM_STATE", str(tmp_path / "state"))  # nothing kept to reuse: measured
    driver = app_driver()
    app = driver.deploy(AppRef(name="online-shop", namespace=NAMESPACE), cluster)
    selector = cluster.kube.core.read_namespaced_service("api", NAMESPACE).spec.selector
    cluster.kube.core.patch_namespaced_service("api", NAMESPACE, {"spec": {"selector": {"app.kubernetes.io/name": "nobody"}}})
    try:
        assert driver.health(app, cluster)[0]  # every workload ready: health alone sees nothing
        with pytest.raises(ClusterError, match="users are not served before the fault") as refused:
            anyio.run(lambda: baseline_meeting_objectives(driver, app, cluster, 20, within_s=5))
        assert "success_rate" in str(refused.value), refused.value
        # and it says where: the app's own metrics show the web tier's calls to api failing
        assert "the app shows:" in str(refused.value) and "calls to api fail" in str(refused.value), refused.value
    finally:
        cluster.kube.core.patch_namespaced_service("api", NAMESPACE, {"spec": {"selector": selector}})
    # (a baseline that misses once and then meets is kept: tests/unit/conductor/test_episode.py)
