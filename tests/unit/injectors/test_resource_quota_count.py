"""The quota's pod cap is the count of the pods that stay: a terminating pod must not be counted."""

from __future__ import annotations

from injectors.resource_quota import stays_counted


def pod(phase: str, deleting: bool = False) -> dict:
    meta = {"name": "p"} | ({"deletionTimestamp": "2026-11-29T08:00:00Z"} if deleting else {})
    return {"metadata": meta, "status": {"phase": phase}}


def test_running_and_pending_pods_stay_counted() -> None:
    assert stays_counted(pod("Running")) and stays_counted(pod("Pending"))


def test_a_terminating_pod_would_free_a_place_so_it_is_not_counted() -> None:
    """CI stop 35: a pod still terminating at plan time raised the cap by one; once it was gone the
    target's replacement was admitted and verify never said yes."""
    assert not stays_counted(pod("Running", deleting=True))
    assert not stays_counted(pod("Pending", deleting=True))


def test_finished_pods_hold_no_place() -> None:
    assert not stays_counted(pod("Succeeded")) and not stays_counted(pod("Failed"))
