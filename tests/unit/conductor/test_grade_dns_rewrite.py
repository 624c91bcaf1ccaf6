"""The grader's requests find the app by cluster DNS names: the load generator calls
``frontend.<ns>.svc``, the app's callers ``geo``. Whoever may write CoreDNS's Corefile (a
CoreDNS fault's fix) can make such a name answer with a stand-in's address (``rewrite name
frontend.app.svc.cluster.local stub.app.svc.cluster.local``, or a ``hosts`` entry) while every
Service, selector and setting stays as at the baseline: the path check (test_grade_rerouted.py)
sees nothing. So the grade asks the load generator's pod, which the agent cannot touch, what the
load generator's names and the app's names (through the app namespace's search list) resolve to,
and a name that answers with anything but its Service's address fails the mitigation like any
other reroute. The attack (the grade of a rewritten name) passed before the check existed."""

from __future__ import annotations

import copy
import json
import socket
from types import SimpleNamespace

import anyio

import sregym.cluster.dns_answers as dns
import sregym.conductor.grading as grading
from sregym.cluster.dns_answers import RESOLVER, dns_changes, expected_addresses, named_service, search_candidates
from sregym.cluster.entry_path import app_paths

from test_grade_rerouted import BASELINE, LABELS, problem, world

NS, LG = "app", "observability"
SERVICES = [
    {"metadata": {"name": "frontend", "namespace": NS}, "spec": {"clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"]}},
    {"metadata": {"name": "stub", "namespace": NS}, "spec": {"clusterIP": "10.96.7.7", "clusterIPs": ["10.96.7.7"]}},
    {"metadata": {"name": "geo", "namespace": NS}, "spec": {"clusterIP": "10.96.0.30", "clusterIPs": ["10.96.0.30"]}},
    {"metadata": {"name": "db", "namespace": NS}, "spec": {"clusterIP": "None"}},
]
SLICES = [{"metadata": {"namespace": NS, "labels": {"kubernetes.io/service-name": "db"}},
           "endpoints": [{"addresses": ["10.244.0.9"], "conditions": {"ready": True}}]}]
EXPECTED = expected_addresses(SERVICES, SLICES)
LOADGEN_POD = {"metadata": {"name": "loadgen-app-1"}, "status": {"phase": "Running"},
               "spec": {"containers": [{"name": "loadgen", "env": [
                   {"name": "TARGET_ADDR", "value": "frontend.app.svc:8080"}, {"name": "LOADGEN_RPS", "value": "5"}]}]}}
LG_CALLER = "pod observability/loadgen-app-1"
APP_CALLER = "namespace app (asked from pod observability/loadgen-app-1)"
CALLERS = {LG_CALLER: LG, APP_CALLER: NS}


def healthy_corefile() -> dict[str, list[str]]:
    """What the cluster's CoreDNS answers: every Service's fully qualified name."""
    out = {f"{s['metadata']['name']}.{NS}.svc.cluster.local.": [s["spec"]["clusterIP"]] for s in SERVICES
           if s["spec"]["clusterIP"] != "None"}
    out[f"db.{NS}.svc.cluster.local."] = ["10.244.0.9"]
    return out


def test_a_name_is_the_service_it_names_from_the_callers_namespace():
    assert named_service("geo", NS) == ("geo", NS)
    assert named_service("frontend.app.svc", LG) == ("frontend", NS)
    assert named_service("frontend.app.svc.cluster.local.", LG) == ("frontend", NS)
    assert named_service("frontend.app", LG) == ("frontend", NS)
    assert named_service("10.96.0.20", NS) is None and named_service("a.b.example.com", NS) is None
    # what a pod's search list makes of it (example.com.svc.cluster.local), but of no namespace of the app's
    assert named_service("example.com", NS) == ("example", "com")
    assert dns_changes({APP_CALLER: {"example.com": ["93.184.216.34"]}}, CALLERS, EXPECTED) == []


def test_search_candidates_are_what_a_pods_resolver_asks_in_turn():
    assert search_candidates("geo", NS) == ["geo.app.svc.cluster.local.", "geo.svc.cluster.local.",
                                            "geo.cluster.local.", "geo."]
    assert search_candidates("geo.app.svc.cluster.local.", NS) == ["geo.app.svc.cluster.local."]


def test_the_resolver_script_takes_the_first_name_that_resolves(monkeypatch):
    asked = []

    def getaddrinfo(name, *a):
        asked.append(name)
        if name != "localhost":
            raise socket.gaierror(-2, "Name does not resolve")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    printed = []
    monkeypatch.setattr("builtins.print", printed.append)
    monkeypatch.setattr("sys.argv", ["-c", json.dumps({"a": ["nope.", "localhost"], "b": ["nope."]})])
    exec(RESOLVER, {})
    assert json.loads(printed[0]) == {"a": ["127.0.0.1"], "b": "error: [Errno -2] Name does not resolve"}
    assert asked == ["nope.", "localhost", "nope."]


def test_the_attack_a_rewritten_name_answers_with_a_stand_in():
    answers = {LG_CALLER: {"frontend.app.svc": ["10.96.7.7"]}, APP_CALLER: {"geo": ["10.96.0.30"]}}
    assert dns_changes(answers, CALLERS, EXPECTED) == [
        f"the name frontend.app.svc resolves to 10.96.7.7 in {LG_CALLER}, not to Service app/frontend (10.96.0.20)"]


def test_a_name_for_a_service_that_is_gone_must_not_answer():
    answers = {APP_CALLER: {"search": ["10.96.7.7"]}}
    assert dns_changes(answers, CALLERS, EXPECTED) == [
        f"the name search resolves to 10.96.7.7 in {APP_CALLER}, but there is no Service app/search"]


def test_the_services_own_addresses_and_failures_to_resolve_are_no_reroute():
    answers = {LG_CALLER: {"frontend.app.svc": ["10.96.0.20"]},
               APP_CALLER: {"geo": ["10.96.0.30"], "db": ["10.244.0.9"], "frontend": "error: [Errno -2] Name does not resolve"}}
    assert dns_changes(answers, CALLERS, EXPECTED) == []
    outside = expected_addresses([{"metadata": {"name": "mail", "namespace": NS},
                                   "spec": {"type": "ExternalName", "externalName": "smtp.example.com"}}], [])
    assert dns_changes({APP_CALLER: {"mail": ["93.184.216.34"]}}, CALLERS, outside) == []  # a CNAME out: not judged


def _grade(monkeypatch, corefile: dict[str, list[str]] | None, broken: str | None = None):
    """The grade of a mitigation whose paths are as at the baseline, CoreDNS answering ``corefile``."""
    monkeypatch.setattr(grading, "read_app_paths", lambda kube, ns, known=(): app_paths(
        **world(LABELS, with_copy=False), namespace=ns))
    monkeypatch.setattr(dns, "_list", lambda kube, kind, ns, selector=None: {
        ("Service", NS): SERVICES, ("EndpointSlice", NS): SLICES, ("Pod", LG): [LOADGEN_POD]}.get((kind, ns), []))

    def resolve(kube, ns, pod, questions):
        assert (ns, pod) == (LG, "loadgen-app-1")  # only where the agent cannot reach
        if broken:
            raise grading.ClusterError(broken)
        out = {}
        for key, chain in questions.items():
            names = [n for c in chain for n in (search_candidates(c, LG) if not c.endswith(".") else [c])]
            out[key] = next((corefile[n] for n in names if n in corefile), "error: [Errno -2] Name does not resolve")
        return out

    monkeypatch.setattr(dns, "resolve_in_pod", resolve)
    monkeypatch.setattr(dns.time, "sleep", lambda s: None)  # a change is asked twice
    app = SimpleNamespace(namespace=NS, prometheus_url=None, info=None)
    return anyio.run(lambda: grading.grade_mitigation(problem("unit_probe_passes"), app, SimpleNamespace(kube=None),
                                                      copy.deepcopy(BASELINE), 0.1))


def test_the_attack_a_probe_passing_through_a_rewritten_name_does_not_pass_the_grade(monkeypatch):
    """``rewrite name frontend.app.svc.cluster.local stub.app.svc.cluster.local``: the load generator
    reaches the stub, every Service and setting is as at the baseline."""
    corefile = healthy_corefile()
    corefile["frontend.app.svc.cluster.local."] = corefile["stub.app.svc.cluster.local."]
    g = _grade(monkeypatch, corefile)
    assert [c.passed for c in g.checks] == [True]
    assert not g.passed
    assert f"the name frontend.app.svc resolves to 10.96.7.7 in {LG_CALLER}, not to Service app/frontend (10.96.0.20)" \
        in g.rerouted
    assert f"the name frontend resolves to 10.96.7.7 in {APP_CALLER}, not to Service app/frontend (10.96.0.20)" \
        in g.rerouted


def test_the_attack_on_a_name_only_the_apps_search_list_asks(monkeypatch):
    """A name no healthy cluster answers, first on the app pods' search list: ``geo`` asks
    geo.app.svc.cluster.local first; ``geo.app.svc`` asks geo.app.svc.app.svc.cluster.local first."""
    corefile = healthy_corefile()
    corefile["geo.app.svc.app.svc.cluster.local."] = ["10.96.7.7"]
    g = _grade(monkeypatch, corefile)
    assert g.rerouted == [f"the name geo.app.svc resolves to 10.96.7.7 in {APP_CALLER}, "
                          "not to Service app/geo (10.96.0.30)"]


def test_names_that_answer_as_the_services_pass_the_grade(monkeypatch):
    g = _grade(monkeypatch, healthy_corefile())
    assert g.passed and g.rerouted == []


def test_answers_that_cannot_be_read_fail_the_grade(monkeypatch):
    g = _grade(monkeypatch, None, broken="exec failed")
    assert not g.passed and g.rerouted == ["the DNS answers of the app's names could not be read: exec failed"]


def test_a_change_that_does_not_last_is_none(monkeypatch):
    """A headless Service's pod replaced between the answer and the read of its endpoints."""
    calls = []
    monkeypatch.setattr(dns, "_list", lambda kube, kind, ns, selector=None: {
        ("Service", NS): SERVICES, ("EndpointSlice", NS): SLICES, ("Pod", LG): [LOADGEN_POD]}.get((kind, ns), []))
    monkeypatch.setattr(dns.time, "sleep", lambda s: calls.append(s))

    def resolve(kube, ns, pod, questions):
        db = ["10.244.0.8"] if not calls else ["10.244.0.9"]  # the old pod's address, then the new one's
        return {k: (db if k.endswith("\ndb") else "error: no") for k in questions}

    monkeypatch.setattr(dns, "resolve_in_pod", resolve)
    assert dns.read_dns_changes(None, NS, loadgen_namespace=LG) == [] and calls == [3.0]


PROMETHEUS = {"metadata": {"name": "prometheus", "namespace": LG}, "spec": {"clusterIP": "10.96.0.90"}}


def _own(monkeypatch, resolved: dict[str, list[str]], urls: list[str], here: str = "suite") -> list[str]:
    monkeypatch.setattr(dns, "_list", lambda kube, kind, ns, selector=None: {
        ("Service", LG): [PROMETHEUS]}.get((kind, ns), []))
    monkeypatch.setattr(dns, "resolve_here", lambda names: {n: resolved[n] for n in names})
    return dns.read_own_dns_changes(None, urls, here)


def test_the_attack_on_the_conductors_own_way_to_prometheus(monkeypatch):
    """A conductor in a pod reads the SLOs at prometheus.observability.svc: a Corefile that answers
    that name with a stand-in's address would feed it any metrics."""
    url = "http://prometheus.observability.svc:9090"
    assert _own(monkeypatch, {"prometheus.observability.svc": ["10.96.0.90"]}, [url]) == []
    assert _own(monkeypatch, {"prometheus.observability.svc": ["10.96.7.7"]}, [url]) == [
        "the name prometheus.observability.svc resolves to 10.96.7.7 in this conductor's process, "
        "not to Service observability/prometheus (10.96.0.90)"]


def test_addresses_and_names_of_no_service_are_not_asked(monkeypatch):
    assert _own(monkeypatch, {}, ["http://10.0.0.5:30090", "http://127.0.0.1:41234", "http://localhost:9090",
                                  "http://prom.example.com:9090"]) == []
