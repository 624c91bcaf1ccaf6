"""Whether the names the grader's requests are sent to resolve to the Services they name.

The load generator, whose answers are the SLOs, calls the app by a cluster DNS name (its
``TARGET_ADDR``, ``frontend.<ns>.svc:8080``), and the app's callers call each other by Service
names (``geo:8080``). The path check (:mod:`sregym.cluster.entry_path`) proves who answers behind
each Service and which names each setting holds, not what a name resolves to: whoever may write
CoreDNS's Corefile (the fix of a CoreDNS fault) can answer a name with a stand-in's address (a
``rewrite`` of the name to another Service's, a ``hosts`` or ``template`` entry) while every
Service, selector and setting stays as at the baseline. So the grade asks the resolver each caller
uses, from the caller's own pod (its resolv.conf search list and its source address, which a
Corefile ``view`` may select on), and compares every answer with the address of the Service the
name names: its ClusterIP, or for a headless Service its endpoints' addresses. A name that does not
resolve is no reroute (nothing answers in a stand-in's place); a name that answers with another
address, or names a Service that no longer exists and answers anyway, is one.

Asked from the load generator's pod only: the agent can neither exec there nor change it (it may
exec into the app's pods, and write a ``python3`` there that prints any answer, or run its own pod
with another resolver). Asked there: the hosts of its settings that name a Service of the app,
through its own resolver; and every Service of the app as the app's pods write it (``geo``,
``geo.<ns>``, ``geo.<ns>.svc``, ``geo.<ns>.svc.<domain>``), each through the app namespace's search
list spelled out as fully qualified names (the first that resolves is the app pod's answer, as its
resolver with ``ndots:5`` takes it). Not covered (docs/security.md "Cluster DNS"): a Corefile
``view`` keyed on an app pod's own address, which answers that pod otherwise than the load
generator's; a ``forward`` to a server the agent runs, which may answer otherwise in time (the
check asks once, after the oracles' windows). A conductor that reads Prometheus by a Service's name
asks its own resolver for it (:func:`read_own_dns_changes`).
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import urllib3

from sregym.core.errors import ClusterError

# run in a caller's pod: each name as the pod's own resolver answers it (getaddrinfo: resolv.conf,
# its search list and ndots, as the caller's HTTP client resolves it), IPv4 as the clusters are
RESOLVER = r"""import json, socket, sys
def first(names):
    why = "no name"
    for name in names:
        try:
            return sorted({a[4][0] for a in socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)})
        except OSError as e:
            why = "error: %s" % e
    return why
print(json.dumps({k: first(v) for k, v in json.loads(sys.argv[1]).items()}))
"""


def search_candidates(name: str, namespace: str, cluster_domain: str = "cluster.local", ndots: int = 5) -> list[str]:
    """The fully qualified names a pod of ``namespace`` asks, in order, to resolve ``name`` (its
    resolv.conf: ``search <ns>.svc.<domain> svc.<domain> <domain>``, ``options ndots:5``)."""
    if name.endswith("."):
        return [name]
    search = [f"{name}.{namespace}.svc.{cluster_domain}.", f"{name}.svc.{cluster_domain}.", f"{name}.{cluster_domain}."]
    return [f"{name}.", *search] if name.count(".") >= ndots else [*search, f"{name}."]


def named_service(host: str, caller_namespace: str, cluster_domain: str = "cluster.local") -> tuple[str, str] | None:
    """The Service (name, namespace) a host names as a caller in ``caller_namespace`` writes it
    (``geo``, ``frontend.ns``, ``frontend.ns.svc``, ``frontend.ns.svc.<domain>``), or None for
    anything else (an IP, an outside name)."""
    labels = host.rstrip(".").split(".")
    if not labels[0] or labels[0].isdigit() or any(not part for part in labels):
        return None
    if len(labels) == 1:
        return labels[0], caller_namespace
    suffix = ["svc", *cluster_domain.split(".")]
    if len(labels) == 2 or labels[2:] == suffix[:len(labels) - 2]:
        return labels[0], labels[1]
    return None


def host_of(address: str) -> str:
    """``host`` of ``scheme://host:port/path`` or ``host:port``."""
    return address.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1].partition(":")[0]


def expected_addresses(services: list[dict], slices: list[dict]) -> dict[tuple[str, str], set[str] | None]:
    """(name, namespace) -> the addresses a name of that Service may resolve to: its ClusterIPs, or
    for a headless Service the addresses of its endpoints; None for an ExternalName (not judged)."""
    out: dict[tuple[str, str], set[str] | None] = {}
    for s in services:
        key = (s["metadata"]["name"], s["metadata"].get("namespace") or "")
        ips = [ip for ip in (s["spec"].get("clusterIPs") or [s["spec"].get("clusterIP")]) if ip and ip != "None"]
        if not ips:
            ips = [a for sl in slices if (sl["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == key[0]
                   and (sl["metadata"].get("namespace") or key[1]) == key[1]
                   for e in sl.get("endpoints") or [] for a in e.get("addresses") or []]
        # an ExternalName is a CNAME to a name outside: nothing of the cluster's to compare with (None)
        out[key] = None if s["spec"].get("type") == "ExternalName" else set(ips)
    return out


def dns_changes(answers: dict[str, dict[str, Any]], caller_namespaces: dict[str, str],
                expected: dict[tuple[str, str], set[str] | None], cluster_domain: str = "cluster.local") -> list[str]:
    """One line per name a caller's resolver answers with an address its Service does not have.
    ``answers``: caller (``ns/pod``) -> name -> the addresses, or an error string."""
    out = []
    judged = {ns for _, ns in expected}  # "example.com" is also Service example of namespace com: not ours
    for caller, by_name in sorted(answers.items()):
        for name, got in sorted(by_name.items()):
            if isinstance(got, str) or not got:
                continue  # does not resolve: nothing answers in a stand-in's place
            svc = named_service(name, caller_namespaces[caller], cluster_domain)
            if svc is None or svc[1] not in judged:
                continue
            if svc in expected and expected[svc] is None:
                continue
            want = expected.get(svc)
            if want is None:
                out.append(f"the name {name} resolves to {', '.join(got)} in {caller}, "
                           f"but there is no Service {svc[1]}/{svc[0]}")
            elif not set(got) <= want:
                out.append(f"the name {name} resolves to {', '.join(got)} in {caller}, "
                           f"not to Service {svc[1]}/{svc[0]} ({', '.join(sorted(want)) or 'no address'})")
    return out


def _list(kube: Any, kind: str, namespace: str, selector: str | None = None) -> list[dict]:
    api_version, plural = {"Service": ("v1", "services"), "EndpointSlice": ("discovery.k8s.io/v1", "endpointslices"),
                           "Pod": ("v1", "pods")}[kind]
    try:
        listing = kube.list_json(api_version, plural, namespace, selector)
    except (OSError, urllib3.exceptions.HTTPError) as e:
        raise ClusterError(f"cannot read the {plural} of namespace {namespace}: {e}") from None
    return (listing or {}).get("items") or []


def _running(pods: list[dict]) -> list[dict]:
    return sorted((p for p in pods if (p.get("status") or {}).get("phase") == "Running"
                   and not p["metadata"].get("deletionTimestamp")), key=lambda p: p["metadata"]["name"])


def _questions(kube: Any, namespace: str, loadgen_namespace: str | None, cluster_domain: str = "cluster.local"
               ) -> tuple[str, str, dict[str, dict[str, list[str]]]] | None:
    """(namespace, pod) of the load generator to ask from, and caller -> name -> the names its
    resolver asks in turn; None when no load generator runs (nothing of the grader to fool)."""
    if not loadgen_namespace:
        return None
    pods = _running(_list(kube, "Pod", loadgen_namespace, f"target-namespace={namespace}"))
    services = sorted(s["metadata"]["name"] for s in _list(kube, "Service", namespace))
    if not pods or not services:
        return None
    pod = pods[0]
    hosts = {host_of(str(e["value"])) for c in pod["spec"]["containers"] for e in c.get("env") or [] if "value" in e}
    own = sorted(h for h in hosts if (named_service(h, loadgen_namespace) or ("", ""))[1] == namespace
                 and h.split(".")[0] in services)
    forms = sorted({f for svc in services for f in (svc, f"{svc}.{namespace}", f"{svc}.{namespace}.svc",
                                                     f"{svc}.{namespace}.svc.{cluster_domain}")})
    where = f"{loadgen_namespace}/{pod['metadata']['name']}"
    return loadgen_namespace, pod["metadata"]["name"], {
        f"pod {where}": {h: [h] for h in own},
        f"namespace {namespace} (asked from pod {where})": {f: search_candidates(f, namespace, cluster_domain) for f in forms}}


def resolve_in_pod(kube: Any, namespace: str, pod: str, questions: dict[str, list[str]]) -> dict[str, Any]:
    """For each key, the first of its names the pod's resolver answers: key -> sorted addresses, or
    ``error: ...`` when none resolves."""
    proc = kube.kubectl("exec", "-n", namespace, pod, "--", "python3", "-c", RESOLVER, json.dumps(questions),
                        check=False, timeout=60)
    if proc.returncode != 0:
        raise ClusterError(f"cannot ask the resolver of pod {namespace}/{pod}: "
                           f"{(proc.stderr or proc.stdout).strip()[-300:]}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ClusterError(f"the resolver of pod {namespace}/{pod} answered {proc.stdout[-300:]!r}") from None


def read_dns_changes(kube: Any, namespace: str, *, loadgen_namespace: str | None,
                     cluster_domain: str = "cluster.local", again_after: float = 3.0) -> list[str]:
    """:func:`dns_changes` of the app in ``namespace`` as its callers' resolvers answer now. A
    change is asked once more after ``again_after`` seconds and only a lasting one is kept: a
    headless Service's pod replaced between the answer and the read of its endpoints is none."""
    changes = _read_dns_changes(kube, namespace, loadgen_namespace, cluster_domain)
    if changes and again_after > 0:
        time.sleep(again_after)
        changes = _read_dns_changes(kube, namespace, loadgen_namespace, cluster_domain)
    return changes


def _read_dns_changes(kube: Any, namespace: str, loadgen_namespace: str | None, cluster_domain: str) -> list[str]:
    asked = _questions(kube, namespace, loadgen_namespace, cluster_domain)
    if asked is None:
        return []
    lg_ns, pod, questions = asked
    flat = {f"{caller}\n{name}": chain for caller, names in questions.items() for name, chain in names.items()}
    got = resolve_in_pod(kube, lg_ns, pod, flat) if flat else {}
    answers: dict[str, dict[str, Any]] = {caller: {} for caller in questions}
    for key, value in got.items():
        caller, name = key.split("\n", 1)
        answers[caller][name] = value
    callers = {caller: (lg_ns if caller.startswith("pod ") else namespace) for caller in questions}
    return dns_changes(answers, callers, expected_addresses(_list(kube, "Service", namespace),
                                                            _list(kube, "EndpointSlice", namespace)), cluster_domain)


def resolve_here(names: list[str]) -> dict[str, Any]:
    """Each name as this process's resolver answers it (the conductor's own, e.g. in a pod)."""
    out: dict[str, Any] = {}
    for name in names:
        try:
            out[name] = sorted({a[4][0] for a in socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)})
        except OSError as e:
            out[name] = f"error: {e}"
    return out


def read_own_dns_changes(kube: Any, urls: list[str], here_namespace: str,
                         cluster_domain: str = "cluster.local") -> list[str]:
    """:func:`dns_changes` of the hosts of ``urls`` that name an existing Service (a conductor in a
    pod reads Prometheus at ``prometheus.observability.svc``), as this process resolves them; an
    address, a port-forward's 127.0.0.1 or ``localhost`` names none and is not asked."""
    named = {h: named_service(h, here_namespace, cluster_domain) for h in map(host_of, urls)}
    expected: dict[tuple[str, str], set[str] | None] = {}
    for ns in sorted({svc[1] for svc in named.values() if svc}):
        expected.update(expected_addresses(_list(kube, "Service", ns), _list(kube, "EndpointSlice", ns)))
    hosts = sorted(h for h, svc in named.items() if svc in expected)
    if not hosts:
        return []
    caller = "this conductor's process"
    return dns_changes({caller: resolve_here(hosts)}, {caller: here_namespace}, expected, cluster_domain)
