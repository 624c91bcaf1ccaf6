"""Readiness and liveness probes as evidence: only while they are the probes the chart defined.

An oracle that leans on readiness (a Deployment's available replicas, a pod's Ready condition)
trusts the probe to say whether the container works. An agent that removes or loosens the probe
makes any container "ready", so every such oracle compares each container's probes with the
baseline spec (captured before the fault) and fails when one was removed or weakened. Pure logic:
reading the objects is the caller's.
"""

from __future__ import annotations

from typing import Any

PROBE_KINDS = ("readinessProbe", "livenessProbe", "startupProbe")
HANDLERS = ("httpGet", "tcpSocket", "exec", "grpc")
# Kubernetes' defaults, so a probe written with and without them compares equal.
DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3,
            "successThreshold": 1}
# A larger value of these makes the probe slower or more forgiving (a looser check).
LOOSER_WHEN_LARGER = ("initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold")


def container_probes(pod_spec: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """``container -> probe kind -> probe`` for every container of a pod spec that has probes."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for c in pod_spec.get("containers") or []:
        probes = {k: c[k] for k in PROBE_KINDS if c.get(k)}
        out[c["name"]] = probes
    return out


def workload_probes(workload: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The probes of a Deployment's or StatefulSet's pod template."""
    return container_probes(workload.get("spec", {}).get("template", {}).get("spec", {}))


def _handler(probe: dict[str, Any]) -> tuple[str | None, Any]:
    for h in HANDLERS:
        if h in probe:
            value = dict(probe[h]) if isinstance(probe[h], dict) else probe[h]
            if h == "httpGet" and isinstance(value, dict):
                value.setdefault("scheme", "HTTP")
                value.setdefault("path", "/")
            return h, value
    return None, None


def weakened(baseline: dict[str, dict[str, dict[str, Any]]], live: dict[str, dict[str, dict[str, Any]]],
             where: str) -> list[str]:
    """Why the ``live`` probes of one workload or pod are weaker than its ``baseline`` probes
    (empty: every baseline probe is still there, no more forgiving, and every readiness probe
    checks the same thing).

    A probe added where the baseline had none, or made stricter, is not a weakening."""
    out = []
    for container, probes in sorted(baseline.items()):
        if container not in live:
            continue  # a container that is gone fails elsewhere (it cannot be ready)
        for kind, want in sorted(probes.items()):
            have = live[container].get(kind)
            name = f"{where}/{container} {kind}"
            if not have:
                out.append(f"{name} removed (the chart defines one)")
                continue
            # Readiness is what availability means: /readyz asks the dependencies, a TCP connect does
            # not. A liveness or startup probe only decides restarts, and a fix of a broken one
            # (say a TCP check on the right port) may check differently as long as it checks.
            if kind == "readinessProbe" and _handler(have) != _handler(want):
                out.append(f"{name} checks something else now ({_brief(have)} instead of {_brief(want)})")
                continue
            for key in LOOSER_WHEN_LARGER:
                a, b = int(want.get(key, DEFAULTS[key])), int(have.get(key, DEFAULTS[key]))
                if b > a:
                    out.append(f"{name} loosened: {key} {a} -> {b}")
            a, b = int(want.get("successThreshold", 1)), int(have.get("successThreshold", 1))
            if b < a:
                out.append(f"{name} loosened: successThreshold {a} -> {b}")
    return out


def _brief(probe: dict[str, Any]) -> str:
    kind, value = _handler(probe)
    if kind == "httpGet":
        return f"GET {value.get('path')} on port {value.get('port')}"
    if kind == "tcpSocket":
        return f"TCP port {value.get('port')}"
    if kind == "exec":
        return "exec " + " ".join(map(str, value.get("command") or []))[:80]
    return str(kind)
