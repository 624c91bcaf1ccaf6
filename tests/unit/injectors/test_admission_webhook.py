"""admission_webhook's pure logic: the objects it installs, their TLS, the server it runs, and
what recover nudges. (Its effect on a cluster: tests/integration/injectors/test_admission_webhook_on_cluster.py.)"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509

from injectors import admission_webhook as aw
from sregym.core.errors import UserInputError

TELLING = re.compile(r"chaos|fault|inject|sregym|node-ops", re.I)
NS = "online-shop"


def objects() -> list[dict]:
    return aw.manifests("pod-policy", NS, "sregym/shop:abc", "Never", 5)


def by_kind(kind: str) -> dict:
    return next(m for m in objects() if m["kind"] == kind)


def test_the_webhook_refuses_on_failure_only_in_its_namespace_and_never_its_own_server():
    hook = by_kind("ValidatingWebhookConfiguration")["webhooks"][0]
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    assert hook["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NS}}
    assert hook["rules"][0]["resources"] == ["pods"] and hook["rules"][0]["operations"] == ["CREATE"]
    # the server's own pods must be left out, or a scaled-down server could never come back
    server_labels = by_kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    (expr,) = hook["objectSelector"]["matchExpressions"]
    assert expr["operator"] == "NotIn" and server_labels[expr["key"]] in expr["values"]
    # ... and its Service reaches exactly those pods, on the port the webhook calls
    svc = by_kind("Service")
    assert svc["spec"]["selector"].items() <= server_labels.items()
    assert hook["clientConfig"]["service"] == {"name": "pod-policy", "namespace": NS, "path": aw.PATH, "port": 443}
    assert svc["spec"]["ports"][0]["port"] == 443


def test_configuration_is_created_last_and_recovered_first():
    kinds = [m["kind"] for m in objects()]
    assert kinds[-1] == aw.WEBHOOK_CONFIG and kinds.count(aw.WEBHOOK_CONFIG) == 1


def test_nothing_the_agent_reads_names_the_fault_plane():
    for m in objects():
        if m["kind"] == aw.WEBHOOK_CONFIG:
            continue  # cluster-scoped: the agent's RBAC cannot read it
        text = json.dumps({"name": m["metadata"]["name"], "labels": m["metadata"].get("labels"),
                           "annotations": m["metadata"].get("annotations"), "data": m.get("data"),
                           "spec": {k: v for k, v in (m.get("spec") or {}).items() if k != "template"},
                           "pod": (m.get("spec") or {}).get("template")}).replace("sregym/shop:abc", "")
        assert not TELLING.search(text), (m["kind"], TELLING.search(text).group(0))


def test_tls_is_filled_in_without_changing_the_plan():
    plan = objects()
    before = json.dumps(plan)
    tls = aw.serving_tls("pod-policy", NS)
    done = aw.with_tls(plan, tls)
    assert json.dumps(plan) == before  # the journaled plan keeps no key
    secret = next(m for m in done if m["kind"] == "Secret")
    assert base64.b64decode(secret["data"]["tls.key"]) == tls["key"]
    hook = next(m for m in done if m["kind"] == aw.WEBHOOK_CONFIG)["webhooks"][0]
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == tls["ca"]


def test_the_serving_certificate_is_signed_by_the_ca_for_the_services_names():
    tls = aw.serving_tls("pod-policy", NS)
    ca, cert = x509.load_pem_x509_certificate(tls["ca"]), x509.load_pem_x509_certificate(tls["cert"])
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "pod-policy.online-shop.svc" in names  # what the API server dials


def test_params_refuse_a_name_that_is_not_a_dns_label():
    with pytest.raises(UserInputError, match="params.name"):
        aw.AdmissionWebhook.parse_params({"name": "Pod_Policy"})
    with pytest.raises(UserInputError, match="params.how"):
        aw.AdmissionWebhook.parse_params({"how": "delete"})


def test_a_refusal_counts_only_when_it_names_the_webhook():
    msg = 'Internal error occurred: failed calling webhook "pod-policy.online-shop.svc": connection refused'
    assert aw.refused_by_webhook(msg, "pod-policy")
    assert not aw.refused_by_webhook('exceeded quota: compute-resources', "pod-policy")
    assert not aw.refused_by_webhook(None, "pod-policy")


def test_recover_nudges_only_controllers_short_of_pods():
    rs = lambda name, want, have: {"metadata": {"name": name}, "spec": {"replicas": want}, "status": {"replicas": have}}  # noqa: E731
    assert [c["metadata"]["name"] for c in aw.short_of_pods([rs("a", 1, 0), rs("b", 1, 1), rs("c", 0, 0),
                                                             {"metadata": {"name": "d"}, "spec": {"replicas": 2}, "status": {}}])] == ["a", "d"]


@pytest.fixture
def server(tmp_path):
    tls = aw.serving_tls("pod-policy", NS)
    (tmp_path / "tls.crt").write_bytes(tls["cert"])
    (tmp_path / "tls.key").write_bytes(tls["key"])
    (tmp_path / "ca.crt").write_bytes(tls["ca"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "server.py"
    script.write_text(aw.SERVER_SOURCE)
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "PORT": str(port), "TLS_DIR": str(tmp_path)},
                            stderr=subprocess.PIPE)
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    ctx.check_hostname = False  # the certificate names the Service, not 127.0.0.1; the chain is still checked
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        yield f"https://127.0.0.1:{port}", ctx
    finally:
        proc.terminate()
        proc.wait(5)
        proc.stderr.close()


def post(url: str, ctx, body: bytes) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_the_server_answers_an_admission_review_over_tls_and_allows_it(server):
    url, ctx = server
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "operation": "CREATE",
                          "kind": {"group": "", "version": "v1", "kind": "Pod"}}}
    status, body = post(url + aw.PATH, ctx, json.dumps(review).encode())
    assert status == 200
    assert json.loads(body) == {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                "response": {"uid": review["request"]["uid"], "allowed": True}}
    assert post(url + aw.PATH, ctx, b'{"kind": "AdmissionReview"}')[0] == 400
    assert post(url + aw.PATH, ctx, b"not json")[0] == 400
    with urllib.request.urlopen(url + "/healthz", context=ctx, timeout=5) as r:
        assert r.status == 200
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):  # a client not trusting the CA
        urllib.request.urlopen(url + "/healthz", context=ssl.create_default_context(), timeout=5)


def test_the_server_is_shipped_as_the_file_next_to_the_primitive():
    assert aw.SERVER_SOURCE == Path(aw.__file__).with_name("_webhook_server.py").read_text()
    assert by_kind("ConfigMap")["data"][aw.SERVER_FILE] == aw.SERVER_SOURCE


def test_a_refusal_is_told_by_the_api_servers_message():
    from kubernetes.client.exceptions import ApiException

    class Core:
        def create_namespaced_pod(self, namespace, body, dry_run=None):
            assert dry_run == "All"
            e = ApiException(status=500, reason="Internal Server Error")
            e.body = json.dumps({"kind": "Status", "message": 'failed calling webhook "pod-policy.app.svc": no endpoints'})
            raise e

    class Kube:
        core = Core()

    assert aw.admission_refusal(Kube(), "app") == 'failed calling webhook "pod-policy.app.svc": no endpoints'


def test_only_refusals_since_the_plan_count():
    ev = lambda when, msg='failed calling webhook "pod-policy.app.svc"', reason="FailedCreate": {  # noqa: E731
        "reason": reason, "message": msg, "lastTimestamp": when}
    events = [ev("2026-11-27T06:50:00Z"), ev("2026-11-27T07:05:01Z"), ev("2026-11-27T07:05:02Z", msg="exceeded quota"),
              ev("2026-11-27T07:05:03Z", reason="SuccessfulCreate"),
              {"reason": "FailedCreate", "message": 'failed calling webhook "pod-policy.app.svc"',
               "eventTime": "2026-11-27T07:06:00.123456Z"}]
    assert len(aw.refusal_events(events, "pod-policy", "2026-11-27T07:05:00Z")) == 2
    assert len(aw.refusal_events(events, "pod-policy", None)) == 3


def test_a_replica_set_refused_since_the_plan_counts_when_its_events_were_dropped():
    """The controller-manager drops a ReplicaSet's FailedCreate events after 25 (one per 5 minutes
    then): its ReplicaFailure condition still says the webhook refused it."""
    def rs(owner, cond_type="ReplicaFailure", msg='Internal error: failed calling webhook "pod-policy.app.svc"',
           since="2026-11-27T07:05:01Z", status="True"):
        return {"metadata": {"name": "web-1", "ownerReferences": [{"uid": owner}]},
                "status": {"conditions": [{"type": cond_type, "status": status, "reason": "FailedCreate",
                                           "message": msg, "lastTransitionTime": since}]}}
    plan = "2026-11-27T07:05:00Z"
    assert len(aw.refusal_conditions([rs("d1")], "d1", "pod-policy", plan)) == 1
    assert aw.refusal_conditions([rs("d2")], "d1", "pod-policy", plan) == []  # another Deployment's
    assert aw.refusal_conditions([rs("d1", since="2026-11-27T06:59:00Z")], "d1", "pod-policy", plan) == []
    assert aw.refusal_conditions([rs("d1", msg="exceeded quota")], "d1", "pod-policy", plan) == []
    assert aw.refusal_conditions([rs("d1", status="False")], "d1", "pod-policy", plan) == []
    assert aw.refusal_conditions([{"metadata": {"name": "x"}}], "d1", "pod-policy", plan) == []
