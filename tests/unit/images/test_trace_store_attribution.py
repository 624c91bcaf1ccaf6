"""Who sent a span is the trace store's to say, not the sender's (pure logic, no sockets).

The attack: with parallel cells sharing one trace store, an agent's pod posts failed spans under a
service name another cell's app has, claiming that cell's namespace in its resource attributes; the
other cell's agent, whose trace tool reads its own namespace's spans, would see them as its app's.
The store stamps each span with the namespace and pod of the address that sent it, and a sender
that is no single pod (the node's address, as a NodePort post is masqueraded to) gets none.
"""

import importlib.util
import json
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[3] / "charts/observability/images/trace-store/tracestore.py"
_spec = importlib.util.spec_from_file_location("sregym_tracestore_attr", _PATH)
ts = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ts
_spec.loader.exec_module(ts)

NS = "k8s.namespace.name"


def export(service: str, claims: dict[str, str] | None = None) -> bytes:
    attrs = {"service.name": service, **(claims or {})}
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()]},
        "scopeSpans": [{"spans": [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                                   "name": "GET /search", "kind": 2, "startTimeUnixNano": "1700000000000000000",
                                   "endTimeUnixNano": "1700000000250000000", "status": {"code": 2}}]}]}]}).encode()


def ingest(store, body: bytes, sender):
    store.add(ts.spans_from_request(ts.parse_request(body, "application/json"), sender=sender))


def process_tags(store) -> dict:
    [trace] = store.find(limit=5)
    [process] = trace["processes"].values()
    return {t["key"]: t["value"] for t in process["tags"]}


def in_namespace(store, namespace: str) -> list:
    return store.find(service="search", tags={NS: namespace})


def test_a_span_claiming_another_cells_namespace_is_stamped_with_its_senders():
    store = ts.TraceStore()
    ingest(store, export("search", {NS: "hotel-reservation-p1", "k8s.pod.name": "search-7d9f-x"}),
           ts.Sender("hotel-reservation", "probe-5c6f-q"))
    tags = process_tags(store)
    assert tags[NS] == "hotel-reservation" and tags["k8s.pod.name"] == "probe-5c6f-q"
    assert tags[ts.SENDER_KEY] == "pod"
    assert tags["claimed." + NS] == "hotel-reservation-p1"  # kept, marked as a claim
    assert in_namespace(store, "hotel-reservation-p1") == []  # the other cell never sees it
    assert len(in_namespace(store, "hotel-reservation")) == 1


def test_a_sender_that_is_no_pod_gets_no_namespace():
    """A pod's post to <node IP>:<NodePort> reaches the store from the node's address."""
    store = ts.TraceStore()
    ingest(store, export("search", {NS: "hotel-reservation"}), None)
    tags = process_tags(store)
    assert NS not in tags and tags[ts.SENDER_KEY] == "unattributed"
    assert in_namespace(store, "hotel-reservation") == []
    assert len(store.find(service="search")) == 1  # still stored, for an unscoped query


def test_an_honest_senders_claims_are_not_duplicated():
    store = ts.TraceStore()
    ingest(store, export("search", {NS: "shop", "k8s.pod.name": "api-1"}), ts.Sender("shop", "api-1"))
    tags = process_tags(store)
    assert tags[NS] == "shop" and not any(k.startswith("claimed.") for k in tags)


def test_services_can_be_listed_for_one_namespace():
    store = ts.TraceStore()
    ingest(store, export("search"), ts.Sender("a", "search-1"))
    ingest(store, export("fence"), ts.Sender("b", "probe-1"))
    status, body = ts.query(store, "/api/services", {"tag": [f"{NS}:a"]})
    assert status == 200 and body["data"] == ["search"]
    assert ts.query(store, "/api/services", {})[1]["data"] == ["fence", "search"]


def pod(ns, name, ip, phase="Running", host_network=False):
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"hostNetwork": host_network}, "status": {"podIP": ip, "phase": phase}}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_directory_names_the_one_live_pod_with_that_address_and_caches_it():
    asked = []

    def lookup(ip):
        asked.append(ip)
        return [pod("a", "old", ip, phase="Succeeded"), pod("a", "web-1", ip)]

    clock = Clock()
    directory = ts.PodDirectory(lookup, ttl=30, clock=clock)
    assert directory.who("10.244.0.7") == ts.Sender("a", "web-1")
    assert directory.who("::ffff:10.244.0.7") == ts.Sender("a", "web-1")
    assert asked == ["10.244.0.7"]  # cached
    clock.now = 31
    directory.who("10.244.0.7")
    assert asked == ["10.244.0.7", "10.244.0.7"]


def test_the_nodes_address_and_ambiguous_addresses_name_no_pod():
    """hostNetwork pods share the node's address, which every NodePort post comes from."""
    directory = ts.PodDirectory(lambda ip: [pod("observability", "node-exporter-x", ip, host_network=True)])
    assert directory.who("10.0.0.5") is None
    two = ts.PodDirectory(lambda ip: [pod("a", "x", ip), pod("b", "y", ip)])
    assert two.who("10.244.0.9") is None


def test_a_failing_lookup_names_no_pod_and_is_counted():
    def lookup(ip):
        raise OSError("connection refused")

    directory = ts.PodDirectory(lookup)
    assert directory.who("10.244.0.9") is None and directory.errors == 1
    assert "connection refused" in directory.last_error


def test_a_flood_evicts_the_flooders_own_traces_first():
    """Enough made-up spans would push another cell's real traces past the store's bound; the
    heaviest sender namespace loses its oldest traces first."""
    store = ts.TraceStore(max_spans=6)

    def post(trace_no: int, sender):
        body = json.loads(export("search"))
        body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = f"{trace_no:032x}"
        ingest(store, json.dumps(body).encode(), sender)

    post(1, ts.Sender("victim", "search-1"))
    post(2, ts.Sender("victim", "search-1"))
    for n in range(10, 30):
        post(n, ts.Sender("attacker", "probe-1"))
    assert store.span_count == 6 and store.dropped == 16
    assert store.trace(f"{1:032x}") and store.trace(f"{2:032x}")  # the victim's traces stay
    assert store.trace(f"{29:032x}") and not store.trace(f"{10:032x}")  # the flood keeps only its newest
