"""Whether ``lifecycle.deploy`` reuses the release in place or upgrades it.

A release at the same chart hash is reused when its objects are as the chart made them and it is
ready. One that is undrifted but not ready yet (the last run's recovery still bringing a workload
back) is waited for a little and reused, not upgraded: an upgrade changes nothing there and made
the release "redeployed", so the next run re-measured its SLO baseline over the tail of the last
run's outage (2 of 5 gym resets on 2026-11-27). Drift (an agent's edit) is always put back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sregym.apps import lifecycle, load_app
from sregym.core.errors import ClusterError


@pytest.fixture
def world(monkeypatch):
    state = SimpleNamespace(ready=True, drift=[], ready_later=True, upgrades=0, waits=[], removals=0, order=[], helm_state="deployed")
    spec = load_app("online-shop")
    monkeypatch.setattr(lifecycle, "ensure_app_namespace", lambda cluster, ns: None)
    monkeypatch.setattr(lifecycle, "ensure_namespace", lambda cluster, ns: None)
    monkeypatch.setattr(lifecycle, "install_values", lambda cluster, spec, values: {"sregym": {"chartHash": "h1"}})
    monkeypatch.setattr(lifecycle.release, "installed", lambda cluster, name, ns: (state.helm_state, "h1"))
    monkeypatch.setattr(lifecycle.release, "drifted", lambda cluster, name, ns: list(state.drift))
    monkeypatch.setattr(lifecycle, "status", lambda *a, **k: SimpleNamespace(ready=state.ready))

    def upgrade(cluster, spec, ns, merged):
        state.order.append("upgrade")
        state.upgrades += 1

    def put_back(cluster, name, ns):
        state.order.append("put back")
        return []

    def wait_ready(cluster, spec, ns=None, *, timeout=600, poll=3):
        state.waits.append(timeout)
        if not state.ready_later and timeout == lifecycle.READY_GRACE_S:
            raise ClusterError("not ready")

    monkeypatch.setattr(lifecycle.release, "upgrade_install", upgrade)
    monkeypatch.setattr(lifecycle.release, "replace_union_conflicts", put_back)
    monkeypatch.setattr(lifecycle.release, "remove_additions",
                        lambda cluster, name, ns: setattr(state, "removals", state.removals + 1) or [])
    monkeypatch.setattr(lifecycle, "wait_ready", wait_ready)
    state.deploy = lambda: lifecycle.deploy(SimpleNamespace(), spec, "online-shop")
    return state


def test_a_ready_undrifted_release_is_reused_at_once(world):
    result = world.deploy()
    assert result.reused and world.upgrades == 0 and world.waits == [] and world.removals == 0


def test_a_drifted_release_is_upgraded_and_then_loses_what_no_manifest_had(world):
    """helm's merge keeps an entry no manifest had (an agent's env entry): the upgrade is followed by
    their removal (``release.remove_additions``)."""
    world.drift = ["apps.v1.Deployment.online-shop.web"]
    result = world.deploy()
    assert not result.reused and world.upgrades == 1 and world.removals == 1
    # a probe or volume rewritten another way is put back first: the merge would make it invalid
    assert world.order == ["put back", "upgrade"]


def test_an_undrifted_release_still_coming_up_is_waited_for_and_reused_not_upgraded(world):
    world.ready = False
    result = world.deploy()
    assert result.reused and world.upgrades == 0 and world.waits == [lifecycle.READY_GRACE_S]


def test_an_undrifted_release_that_does_not_come_up_in_the_grace_is_upgraded(world):
    world.ready, world.ready_later = False, False
    result = world.deploy()
    assert not result.reused and world.upgrades == 1


@pytest.mark.parametrize("ready", [True, False])
def test_a_drifted_release_is_upgraded_ready_or_not_and_never_waited_for(world, ready):
    # an agent's edit (or a crashed run's) must not survive into the next run, whatever the readiness
    world.ready, world.drift = ready, ["Service/frontend"]
    result = world.deploy()
    assert not result.reused and world.upgrades == 1 and lifecycle.READY_GRACE_S not in world.waits
    assert result.drift_reset == ["Service/frontend"]


def test_a_release_whose_drift_cannot_be_told_is_upgraded(world):
    world.ready, world.drift = False, ["(unknown)"]
    assert not world.deploy().reused and world.upgrades == 1


def test_a_release_an_upgrade_left_failed_has_its_rewritten_probes_put_back_before_the_next_upgrade(world):
    # measured: a readiness probe rewritten as a TCP check failed the upgrade ("may not specify more
    # than 1 handler type") and left the release "failed"; the next deploy must not fail the same way
    world.helm_state = "failed"
    result = world.deploy()
    assert not result.reused and world.order == ["put back", "upgrade"]
