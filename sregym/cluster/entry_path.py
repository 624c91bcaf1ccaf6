"""The paths the load generator's requests take through an app: each Service, the workloads whose
pods answer behind it, what those pods run, and which of the app's Services each setting names.

The SLOs are measured on the load generator's answers, so whoever decides who answers it decides
the SLOs: a stub that says 200 to everything, put behind the entry Service (its selector pointed at
the stub, or the stub given the entry's labels), makes every request a fast success while the app
behind it is as broken as before (measured: the anti-gaming matrix's ``stub_entry_service``). A
stand-in need not sit at the entry, nor answer wrong: a copy of the faulty component's own
Deployment under another name computes its answers right, and a fault bound to the component's
pods does not follow it; the callers reach it through the component's Service (the copy wearing
its labels, or the selector pointed at the copy) or through their address settings
(``GEO_ADDR``). So the baseline records the path of every Service of the app and the wiring
(:func:`app_paths`), and grading compares the live ones with them (:func:`app_path_changes`);
:func:`entry_path` / :func:`path_changes` are the one-Service form an older baseline recorded.

Pure functions on Kubernetes objects as JSON (``kubectl get -o json`` items).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import urllib3

from sregym.core.errors import ClusterError

# what a container runs: a stub needs another command (or image) than the chart's, or args where the
# chart ran the image's own. Args where the chart gave some are a store's flags: other flags tune it
# (shop_redis_maxmemory_noeviction is fixed by a sane --maxmemory, not only by the chart's), they do
# not make it another program, so only args given where there were none are compared.
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


def image_name(ref: str | None) -> str | None:
    """An image reference as the runtime resolves it: ``docker.io/sregym/hotel:x`` and
    ``sregym/hotel:x`` (``docker.io/library/redis`` and ``redis``) are one image, written two ways."""
    if not ref:
        return ref
    for prefix in ("docker.io/", "index.docker.io/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
            return ref[len("library/"):] if ref.startswith("library/") else ref
    return ref


def _runs(container: dict) -> dict[str, Any]:
    return {k: image_name(container.get(k)) if k == "image" else container.get(k) for k in RUNS}


def runs(template_spec: dict) -> dict[str, dict[str, Any]]:
    """Container name -> what it runs (image, command, args) in a pod template's spec."""
    return {c["name"]: _runs(c) for c in template_spec.get("containers") or []}


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
            if pod is None and ref.get("kind") == "Pod" and by_pod:
                continue  # a pod made after the pods were listed (the lists are not one snapshot): next sample
            if pod is None:
                strays.append(ref.get("name") or ",".join(e.get("addresses") or []) or "an endpoint")
                continue
            workload = workload_of(pod, by_rs)
            if workload is None or workload not in by_ref:
                strays.append(f"pod/{pod['metadata']['name']}")
                continue
            template = runs(by_ref[workload]["spec"]["template"]["spec"])
            patched = _patched(pod, template)
            if patched:  # a pod's image may be patched in place: its workload's template says nothing
                strays.append(f"pod/{pod['metadata']['name']} (patched to run another {patched})")
                continue
            backends[workload] = template
    return {"service": service["metadata"]["name"], "selector": (service.get("spec") or {}).get("selector"),
            "backends": backends, "strays": sorted(set(strays)), "ports": ports_of(service, slices)}


def _patched(pod: dict, template: dict[str, dict[str, Any]]) -> str:
    """What a pod's containers run that its workload's template does not ('' when nothing)."""
    changed = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        want, now = template.get(c["name"]), _runs(c)
        changed += [k for k in RUNS if want is None or now[k] != want.get(k)]
    return "/".join(dict.fromkeys(changed))


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
    if not recorded.get("strays"):  # a Service that had strays at the baseline: which are new is unknowable
        out += [f"Service {name} sends requests to {stray}, which no workload of the baseline runs"
                for stray in live.get("strays") or []]
    if "ports" in recorded:  # a path recorded before ports were compares the rest
        out += _port_changes(name, recorded["ports"] or {}, live.get("ports") or {})
    want = recorded.get("backends") or {}
    for workload, containers in sorted((live.get("backends") or {}).items()):
        if workload not in want:
            out.append(f"Service {name} sends requests to {workload}, which did not answer it at the baseline")
            continue
        out += runs_changes(workload, want[workload], containers)
    return out


def runs_changes(workload: str, before: dict[str, dict], now: dict[str, dict]) -> list[str]:
    """How what ``workload``'s pod template runs now (:func:`runs`) differs from what it ran at the
    baseline: a container it did not run, another image or command, args where it had none."""
    out = []
    for container, what in sorted(now.items()):
        was = before.get(container)
        if was is None:
            out.append(f"{workload} runs a container {container} it did not run at the baseline")
            continue
        changed = [k for k in RUNS if what.get(k) != was.get(k) and not (k == "args" and was.get(k))]
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
# and what the app's settings are written in
APP_PATH_KINDS = (*PATH_KINDS, ("v1", "configmaps", "ConfigMap"))


def _list_kinds(kube: Any, namespace: str, kinds: tuple[tuple[str, str, str], ...], what: str) -> dict[str, list]:
    """Kind -> the items of ``kinds`` in ``namespace``: one API GET per kind, side by side (the slo
    oracle reads them at every 2 s sample: a kubectl process for it was 0.3-1 s of CPU each time on
    2 busy cores)."""
    def listed(kind: tuple[str, str, str]) -> list[dict]:
        api_version, plural, name = kind
        try:
            listing = kube.list_json(api_version, plural, namespace)
        except (OSError, urllib3.exceptions.HTTPError) as e:
            raise ClusterError(f"cannot read {what}: {e}") from None
        if listing is None:
            raise ClusterError(f"cannot read {what}: {plural} ({api_version}) are not served")
        return [dict(item, kind=name) for item in listing.get("items") or []]  # list items carry no kind

    with ThreadPoolExecutor(max_workers=len(kinds)) as pool:
        return {kind[2]: items for kind, items in zip(kinds, pool.map(listed, kinds))}


def _slices_of(slices: list[dict], service: str) -> list[dict]:
    return [s for s in slices if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == service]


def read_entry_path(kube: Any, namespace: str, service: str) -> dict[str, Any]:
    """The entry path of ``service`` in ``namespace`` as the cluster has it now."""
    by_kind = _list_kinds(kube, namespace, PATH_KINDS, f"the entry path of Service {namespace}/{service}")
    found = [s for s in by_kind["Service"] if s["metadata"]["name"] == service]
    return entry_path(found[0] if found else None, _slices_of(by_kind["EndpointSlice"], service), by_kind["Pod"],
                      by_kind["ReplicaSet"], by_kind["Deployment"] + by_kind["StatefulSet"])


# A setting's words that may name a host: "geo:8080", "nats://shop-queue:4222", "http://a.ns.svc:80/x",
# "shop-db", "10.244.0.7:18080", an nginx "server web:8080;" line
_WORD = re.compile(r"[A-Za-z0-9_.:/@\[\]-]+")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_SKIP_CONFIGMAPS = {"kube-root-ca.crt"}  # the cluster's CA, in every namespace


# a keyword DSN writes the host and the port apart in one value: "host=db port=5432 dbname=x" (libpq),
# "Server=db;Port=5432" (ADO)
_KEYWORD_HOST = re.compile(r"(?i)\b(?:host|hostaddr|hostname|server|address|addr)\s*=\s*([^\s;,:'\"]+)(?=[\s;,'\"]|$)")
_KEYWORD_PORT = re.compile(r"(?i)\bport\s*=\s*(\d+)\b")


def _keyword_address(value: str) -> str:
    """``value`` with a keyword DSN's host and port written as one address (``db:5432``), so the
    port is compared with its host; any other value as it is."""
    host, port = _KEYWORD_HOST.search(value), _KEYWORD_PORT.search(value)
    if not (host and port):
        return value
    for start, end, text in sorted([(host.start(), host.end(), f" {host.group(1)}:{port.group(1)} "),
                                    (port.start(), port.end(), " ")], reverse=True):
        value = value[:start] + text + value[end:]
    return value


def references(value: str, services: set[str], namespace: str) -> list[str]:
    """The addresses a setting's value names, sorted: the app's Services (``name[:port]``, however
    qualified), and anything else written as an address (``host:port``, a URL, an IP, ``localhost``:
    a stub exec'd beside a caller, a pod's IP; a keyword DSN's ``host=`` with its ``port=``). A bare
    word is a host only when it is a Service's name."""
    found = set()
    for word in _WORD.findall(_keyword_address(value or "")):
        host_port = word.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
        host, _, port = host_port.partition(":")
        labels = host.split(".")
        if labels[0] in services and (len(labels) == 1 or labels[1] in (namespace, "svc")):
            host = labels[0]
        elif not (host and (port.isdigit() or "://" in word or host == "localhost" or _IPV4.fullmatch(host))):
            continue
        found.add(f"{host}:{port}" if port.isdigit() else host)
    return sorted(found)


# A port set apart from its host: "DB_PORT" beside "DB_HOST" (or _ADDR, _URL ...). Moved alone, it
# sends every caller to another port of the same host, where the agent's own code may answer (a
# process exec'd into the store's pod, a port added to its Service): compared with its host.
_PORT_SETTING = re.compile(r"^(?:(?P<prefix>.+)_)?PORT$", re.IGNORECASE)
HOST_SETTINGS = ("HOST", "HOSTNAME", "ADDR", "ADDRESS", "SERVER", "URL", "URI", "DSN")


def port_partners(names: Iterable[str]) -> dict[str, str | None]:
    """Each port setting among ``names`` (``PORT``, ``<X>_PORT``) -> the setting that names its
    host (``<X>_HOST``, ``<X>_ADDR``, ... in :data:`HOST_SETTINGS` order), or None where none does."""
    by_upper = {n.upper(): n for n in names}
    out: dict[str, str | None] = {}
    for name in by_upper.values():
        m = _PORT_SETTING.match(name)
        if m:
            prefix = f"{m['prefix']}_".upper() if m["prefix"] else ""
            out[name] = next((by_upper[prefix + s] for s in HOST_SETTINGS if prefix + s in by_upper), None)
    return out


def _port_of(address: str) -> bool:
    return address.rpartition(":")[2].isdigit()


def with_port(host_value: str, port_value: str, services: set[str], namespace: str) -> list[str]:
    """The addresses a host setting names, given the port setting beside it: a bare host and a
    number are one address (``hotel-db`` and ``5432``: ``hotel-db:5432``), as is an address that
    carries no port of its own; where the port is not used so (an address with its own port, a
    port that is not a number), it is kept as a value (``port 5432``)."""
    host, port = (host_value or "").strip(), (port_value or "").strip()
    if not port.isdigit():
        return sorted({*references(host, services, namespace), f"port {port}"})
    if host and not re.search(r"[\s:/@=]", host):
        return references(f"{host}:{port}", services, namespace) or [f"port {port}"]
    refs = references(host, services, namespace)
    joined = [r if _port_of(r) else f"{r}:{port}" for r in refs]
    return sorted(joined if joined != refs else {*refs, f"port {port}"})


def wiring(configmaps: list[dict], workloads: list[dict], services: set[str], namespace: str) -> dict[str, list[str]]:
    """``<Kind>/<workload>/<container> <setting>`` -> the addresses the setting names (:func:`references`),
    for every setting of a workload's containers that names one: its environment as its pods get
    it (``envFrom`` ConfigMaps in order, then ``env``, which wins: a caller may be told another
    address without a ConfigMap changing, and the same address set either way is the same
    wiring), the ConfigMap files mounted into it (an nginx.conf's upstreams), its command and args.
    A port setting is read with the host setting beside it (``<workload> env DB_HOST with DB_PORT``:
    :func:`port_partners`, :func:`with_port`), or as a value where no host is beside it.
    A ConfigMap no workload reads is nobody's setting."""
    out: dict[str, list[str]] = {}
    data = {cm["metadata"]["name"]: cm.get("data") or {} for cm in configmaps
            if cm["metadata"]["name"] not in _SKIP_CONFIGMAPS}

    def note(key: str, value: str) -> None:
        refs = references(value, services, namespace)
        if refs:
            out[key] = refs

    for w in workloads:
        spec = w["spec"]["template"]["spec"]
        volumes = {v["name"]: (v.get("configMap") or {}) for v in spec.get("volumes") or []}
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            where = f"{w['kind']}/{w['metadata']['name']}/{c['name']}"
            env: dict[str, str] = {}
            for source in c.get("envFrom") or []:
                ref = (source.get("configMapRef") or {}).get("name")
                env.update({f"{source.get('prefix') or ''}{k}": v for k, v in data.get(ref, {}).items()})
            for e in c.get("env") or []:
                key_ref = (e.get("valueFrom") or {}).get("configMapKeyRef") or {}
                env[e["name"]] = str(e["value"]) if "value" in e else data.get(key_ref.get("name"), {}).get(
                    key_ref.get("key"), "")
            ports = port_partners(env)
            hosts = {host: port for port, host in ports.items() if host}
            for name, value in sorted(env.items()):
                if name in hosts:
                    out[f"{where} env {name} with {hosts[name]}"] = with_port(value, env[hosts[name]], services,
                                                                              namespace)
                elif name in ports:  # compared with its host; with none beside it (a listen port), as a value
                    if ports[name] is None:
                        out[f"{where} env {name}"] = references(value, services, namespace) or [f"port {value.strip()}"]
                else:
                    note(f"{where} env {name}", value)
            for mount in c.get("volumeMounts") or []:
                cm = volumes.get(mount["name"]) or {}
                paths = {i["key"]: i["path"] for i in cm.get("items") or []}
                for key, value in sorted(data.get(cm.get("name"), {}).items()):
                    path = paths.get(key, key) if not cm.get("items") or key in paths else None
                    if path is not None and mount.get("subPath") in (None, "", path):
                        note(f"{where} file {mount['mountPath']}" + ("" if mount.get("subPath") else f"/{path}"), value)
            note(f"{where} command and args", " ".join(map(str, (c.get("command") or []) + (c.get("args") or []))))
    return out


def app_paths(services: list[dict], slices: list[dict], pods: list[dict], replica_sets: list[dict],
              workloads: list[dict], configmaps: list[dict], *, namespace: str,
              known: Iterable[str] = ()) -> dict[str, Any]:
    """Every Service's path (:func:`entry_path`), the app's workloads and what each runs, and the
    wiring (:func:`wiring`).
    ``known``: Service names that count as the app's though gone now (the baseline's)."""
    names = {s["metadata"]["name"] for s in services} | set(known)
    return {"services": {s["metadata"]["name"]: entry_path(s, _slices_of(slices, s["metadata"]["name"]), pods,
                                                           replica_sets, workloads) for s in services},
            "workloads": sorted(f"{w['kind']}/{w['metadata']['name']}" for w in workloads),
            # what each runs: the metrics an SLO reads from the app's own pods are the app's only while
            # their workload runs what it ran (``metric_sources``)
            "runs": {f"{w['kind']}/{w['metadata']['name']}": runs(w["spec"]["template"]["spec"]) for w in workloads},
            "wiring": wiring(configmaps, workloads, names, namespace)}


def list_app_objects(kube: Any, namespace: str) -> dict[str, list]:
    """Kind -> the objects of ``namespace`` that the app's paths are read from (``APP_PATH_KINDS``),
    for a caller that reads them for more than one check in a sample."""
    return _list_kinds(kube, namespace, APP_PATH_KINDS, f"the Services' paths in namespace {namespace}")


def read_app_paths(kube: Any, namespace: str, known: Iterable[str] = (), *,
                   objects: dict[str, list] | None = None) -> dict[str, Any]:
    """:func:`app_paths` of ``namespace`` as the cluster has it now (``objects``: as
    :func:`list_app_objects` just listed them)."""
    by_kind = objects if objects is not None else list_app_objects(kube, namespace)
    return app_paths(by_kind["Service"], by_kind["EndpointSlice"], by_kind["Pod"], by_kind["ReplicaSet"],
                     by_kind["Deployment"] + by_kind["StatefulSet"], by_kind["ConfigMap"], namespace=namespace,
                     known=known)


def app_path_changes(recorded: dict[str, Any], live: dict[str, Any]) -> list[str]:
    """How the live paths differ from the recorded ones in a way that changes who answers the app's
    requests: a Service of the baseline answered by something else (:func:`path_changes`), or a
    setting of a baseline workload that names other Services or pods (one line per setting and
    change, naming every workload it is in). A Service or workload the agent added is not itself
    a change: only a path to it is."""
    out = []
    for name, path in sorted((recorded.get("services") or {}).items()):
        out += path_changes(path, (live.get("services") or {}).get(name) or {"service": None})
    ours = tuple(f"{w}/" for w in recorded.get("workloads") or [])
    want, got = recorded.get("wiring") or {}, live.get("wiring") or {}
    changed: dict[tuple[str, str, str], list[str]] = {}
    for key in sorted(set(want) | {k for k in got if k.startswith(ours)}):
        if want.get(key) != got.get(key):
            where, setting = key.split(" ", 1)
            changed.setdefault((setting, ", ".join(got.get(key) or ["nothing"]),
                                ", ".join(want.get(key) or ["nothing"])), []).append(where)
    for (setting, now, before), where in changed.items():
        out.append(f"{setting} of {', '.join(where)} names {now} (at the baseline {before})")
    return out
