"""What a fault looks like from outside: pod states read from the live API (never from our plan)."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def _statuses(pod: dict) -> list[dict]:
    st = pod.get("status") or {}
    return (st.get("containerStatuses") or []) + (st.get("initContainerStatuses") or [])


def waiting_reasons(pods: Iterable[dict]) -> set[str]:
    """Reasons containers are waiting (CrashLoopBackOff, ErrImageNeverPull, CreateContainerConfigError ...)."""
    return {(s.get("state") or {}).get("waiting", {}).get("reason") for p in pods for s in _statuses(p)
            if (s.get("state") or {}).get("waiting")} - {None}


def terminated_reasons(pods: Iterable[dict]) -> set[str]:
    """Reasons of current and last terminations (OOMKilled, Error, Completed ...)."""
    out: set[str] = set()
    for p in pods:
        for s in _statuses(p):
            for key in ("state", "lastState"):
                term = (s.get(key) or {}).get("terminated")
                if term and term.get("reason"):
                    out.add(term["reason"])
    return out


def unschedulable(pods: Iterable[dict]) -> list[str]:
    """Names of pods the scheduler refused (PodScheduled=False, reason Unschedulable)."""
    return [p["metadata"]["name"] for p in pods
            for c in (p.get("status") or {}).get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"]


def ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def running_with(pods: Iterable[dict], container: str, test: Callable[[dict], bool]) -> list[str]:
    """Pods that exist and run a container named ``container`` whose live spec passes ``test``."""
    return [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")
            for c in p["spec"]["containers"] if c["name"] == container and test(c)]


def restarts(pods: Iterable[dict]) -> int:
    return sum(s.get("restartCount", 0) for p in pods for s in _statuses(p))
