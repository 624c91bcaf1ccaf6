"""The path the load generator's requests take into an app: its entry Service, the workloads whose
pods answer behind it, and what those pods run.

The SLOs are measured on the load generator's answers, so whoever decides who answers it decides
the SLOs: a stub that says 200 to everything, put behind the entry Service (its selector pointed at
the stub, or the stub given the entry's labels), makes every request a fast success while the app
behind it is as broken as before (measured: the anti-gaming matrix's ``stub_entry_service``). The
path is recorded with the baseline and compared during grading (:func:`path_changes`).

Pure functions on Kubernetes objects as JSON (``kubectl get -o json`` items).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import urllib3

from sregym.core.errors import ClusterError

# what a container runs: a stub needs another command (or image) than the chart's
RUNS = ("image", "command", "args")


def _controller(obj: dict) -> dict | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


def workload_of(pod: dict, replica_sets: dict[str, dict]) -> str | None:
    """``Kind/name`` of the Deployment or StatefulSet that runs ``pod`` (through its ReplicaSet),
    or None for a pod no such workload runs."""
    owner = _controller(pod)
    if owner is None:
        return None
    if owner["kind"] == "StatefulSet":
        return f"StatefulSet/{owner['name']}"
    if owner["kind"] == "ReplicaSet":
        rs = replica_sets.get(owner["name"])
        up = _controller(rs) if rs else None
        if up and up["kind"] == "Deployment":
            return f"Deployment/{up['name']}"
    return None


def runs(template_spec: dict) -> dict[str, dict[str, Any]]:
    """Container name -> what it runs (image, command, args) in a pod template's spec."""
    return {c["name"]: {k: c.get(k) for k in RUNS} for c in template_spec.get("containers") or []}


def entry_path(service: dict | None, slices: list[dict], pods: list[dict], replica_sets: list[dict],
               workloads: list[dict]) -> dict[str, Any]:
    """The entry path as it is now: the Service's selector, and per endpoint the workload behind it
    with what its pod template runs (``workloads``: Deployments and StatefulSets, each with its
    ``kind``). An endpoint that is no pod, or a pod no workload runs, is named as it is."""
    if service is None:
        return {"service": None, "selector": None, "backends": {}, "strays": [], "ports": None}
    by_pod = {p["metadata"]["name"]: p for p in pods}
    by_rs = {r["metadata"]["name"]: r for r in replica_sets}
    by_ref = {f"{w['kind']}/{w['metadata']['name']}": w for w in workloads}
    backends: dict[str, dict] = {}
    strays: list[str] = []
    for s in slices:
        for e in s.get("endpoints") or []:
            if (e.get("conditions") or {}).get("ready") is False:
                continue  # not sent requests
            ref = e.get("targetRef") or {}
            pod = by_pod.get(ref.get("name", "")) if ref.get("kind") == "Pod" else None
            if pod is None:
                strays.append(ref.get("name") or ",".join(e.get("addresses") or []) or "an endpoint")
                continue
            workload = workload_of(pod, by_rs)
            if workload is None or workload not in by_ref:
                strays.append(f"pod/{pod['metadata']['name']}")
                continue
            backends[workload] = runs(by_ref[workload]["spec"]["template"]["spec"])
    return {"service": service["metadata"]["name"], "selector": (service.get("spec") or {}).get("selector"),
            "backends": backends, "strays": sorted(set(strays)), "ports": ports_of(service, slices)}


def ports_of(service: dict, slices: list[dict]) -> dict[str, list]:
    """Where in the pods the requests land: the Service's ports as written (``targetPort`` a number
    or a container port's name) and as its EndpointSlices resolve them to numbers. A stub exec'd
    into the entry's own pod can only listen beside the app's process, on another port; either
    side of this shows the requests sent there."""
    keys = ("name", "port", "protocol", "targetPort")
    return {"service": [{k: p.get(k) for k in keys} for p in (service.get("spec") or {}).get("ports") or []],
            "endpoints": [list(p) for p in sorted({(p.get("name") or "", p.get("port"), p.get("protocol") or "TCP")
                                                   for s in slices for p in s.get("ports") or []}, key=str)]}


def path_changes(recorded: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """How the live path differs from the recorded one in a way that changes who answers the load
    generator; empty when its requests still reach what answered them at the baseline."""
    name = recorded.get("service")
    if live.get("service") is None:
        return [f"Service {name} is gone"]
    out = []
    if live.get("selector") != recorded.get("selector"):
        out.append(f"Service {name} selects {live.get('selector')} (at the baseline {recorded.get('selector')})")
    for stray in live.get("strays") or []:
        out.append(f"Service {name} sends requests to {stray}, which no workload of the baseline runs")
    if "ports" in recorded:  # a path recorded before ports were compares the rest
        out += _port_changes(name, recorded["ports"] or {}, live.get("ports") or {})
    want = recorded.get("backends") or {}
    for workload, containers in sorted((live.get("backends") or {}).items()):
        if workload not in want:
            out.append(f"Service {name} sends requests to {workload}, which did not answer it at the baseline")
            continue
        for container, what in sorted(containers.items()):
            before = want[workload].get(container)
            if before is None:
                out.append(f"{workload} runs a container {container} it did not run at the baseline")
                continue
            changed = [k for k in RUNS if what.get(k) != before.get(k)]
            if changed:
                out.append(f"{workload}/{container} runs another {'/'.join(changed)} than at the baseline "
                           f"({', '.join(f'{k}={what.get(k)!r:.60}' for k in changed)})")
    return out


def _port_changes(name: str | None, recorded: dict, live: dict) -> list[str]:
    out = []
    if live.get("service") != recorded.get("service"):
        out.append(f"Service {name}'s ports (targetPort) are {_ports(live.get('service'))} "
                   f"(at the baseline {_ports(recorded.get('service'))})")
    want = {tuple(p) for p in recorded.get("endpoints") or []}
    got = {tuple(p) for p in live.get("endpoints") or []}
    if got and got != want:  # a Service with no endpoint yet has no ports in its slices either
        out.append(f"Service {name} sends requests to port {_numbers(got)} of its pods "
                   f"(at the baseline {_numbers(want)})")
    return out


def _ports(ports: list[dict] | None) -> str:
    return ", ".join(f"{p.get('port')}->{p.get('targetPort')}" for p in ports or []) or "none"


def _numbers(ports: set[tuple]) -> str:
    return ", ".join(str(p[1]) for p in sorted(ports, key=str)) or "none"


# what the path is made of: (apiVersion, plural, kind), each listed in the app's namespace
PATH_KINDS = (("v1", "services", "Service"), ("discovery.k8s.io/v1", "endpointslices", "EndpointSlice"),
              ("apps/v1", "deployments", "Deployment"), ("apps/v1", "statefulsets", "StatefulSet"),
              ("apps/v1", "replicasets", "ReplicaSet"), ("v1", "pods", "Pod"))


def read_entry_path(kube: Any, namespace: str, service: str) -> dict[str, Any]:
    """The entry path of ``service`` in ``namespace`` as the cluster has it now: one API GET per
    kind, side by side (the slo oracle reads it at every 2 s sample: a kubectl process for it was
    0.3-1 s of CPU each time on 2 busy cores)."""
    def listed(kind: tuple[str, str, str]) -> list[dict]:
        api_version, plural, name = kind
        try:
            listing = kube.list_json(api_version, plural, namespace)
        except (OSError, urllib3.exceptions.HTTPError) as e:
            raise ClusterError(f"cannot read the entry path of Service {namespace}/{service}: {e}") from None
        if listing is None:
            raise ClusterError(f"cannot read the entry path of Service {namespace}/{service}: "
                               f"{plural} ({api_version}) are not served")
        return [dict(item, kind=name) for item in listing.get("items") or []]  # list items carry no kind

    with ThreadPoolExecutor(max_workers=len(PATH_KINDS)) as pool:
        by_kind = {kind[2]: items for kind, items in zip(PATH_KINDS, pool.map(listed, PATH_KINDS))}
    found = [s for s in by_kind["Service"] if s["metadata"]["name"] == service]
    slices = [s for s in by_kind["EndpointSlice"]
              if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == service]
    return entry_path(found[0] if found else None, slices, by_kind["Pod"], by_kind["ReplicaSet"],
                      by_kind["Deployment"] + by_kind["StatefulSet"])
