"""Red team against the agent's API proxy with the real kubectl, every output form: the agent gets an
on-call SRE's cluster-wide reads, the hidden namespace looks like one that does not exist, and no
credential it holds is accepted by the API server."""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from agentplane_cluster_fixtures import ensure_namespace, open_agent_proxy
from polling import eventually
from sregym.cluster.agent_access import grant_agent_access, revoke_agent_access
from sregym.cluster.images import image_ref
from sregym.cluster.kube import kubectl_path
from sregym.core.constants import HIDDEN_NAMESPACE, OWNER_LABEL, OWNER_VALUE

pytestmark = pytest.mark.cluster

SLEEP = ["python3", "-c", "import time\nwhile True: print('tick', flush=True); time.sleep(5)"]


def _pod_spec() -> client.V1PodSpec:
    return client.V1PodSpec(termination_grace_period_seconds=1, containers=[client.V1Container(
        name="main", image=image_ref("base"), image_pull_policy="Never", command=SLEEP)])


@pytest.fixture(scope="module")
def scene(cluster, tmp_path_factory):
    """An app namespace with one running pod, a running pod in the hidden namespace, and the proxy."""
    core, run = cluster.kube.core, uuid.uuid4().hex[:6]
    ns, hidden_pod = f"apx-{run}", f"apx-hidden-{run}"
    ensure_namespace(core, ns)
    ensure_namespace(core, HIDDEN_NAMESPACE)
    core.create_namespaced_pod(ns, client.V1Pod(metadata=client.V1ObjectMeta(name="web", labels={"app": "web"}),
                                                spec=_pod_spec()))
    core.create_namespaced_pod(HIDDEN_NAMESPACE, client.V1Pod(
        metadata=client.V1ObjectMeta(name=hidden_pod, labels={OWNER_LABEL: OWNER_VALUE}), spec=_pod_spec()))

    def running() -> bool:
        return all(core.read_namespaced_pod(name, n).status.phase == "Running"
                   for name, n in (("web", ns), (hidden_pod, HIDDEN_NAMESPACE)))

    try:
        assert eventually(running, 120, 1), "the test pods did not start"
        grant_agent_access(cluster.kube, ns)
        with open_agent_proxy(cluster, ns, tmp_path_factory.mktemp("apx") / "agent.kubeconfig") as proxy:
            yield {"ns": ns, "hidden_pod": hidden_pod, "proxy": proxy, "kubeconfig": proxy.kubeconfig}
    finally:
        revoke_agent_access(cluster.kube, ns)
        core.delete_namespace(ns, grace_period_seconds=0)
        core.delete_namespaced_pod(hidden_pod, HIDDEN_NAMESPACE, grace_period_seconds=0)


def shows_hidden(text: str, hidden_pod: str) -> bool:
    """Whether kubectl output shows a hidden object or the hidden Namespace, in any output form.
    (The name itself may appear as configuration of another object: see the report on the log
    query service's EXCLUDE_NAMESPACES.)"""
    ns = re.escape(HIDDEN_NAMESPACE)
    return hidden_pod in text or bool(re.search(
        rf'^{ns}\s|{ns}/|"namespace": "{ns}"|namespace: {ns}\b|"name": "{ns}"|name: {ns}\b', text, re.M))


def kubectl(scene, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kubectl_path(), "--kubeconfig", str(scene["kubeconfig"]), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_every_output_form_shows_the_cluster_without_the_fault_plane(scene) -> None:
    ns, hidden_pod = scene["ns"], scene["hidden_pod"]
    node = json.loads(kubectl(scene, "get", "nodes", "-o", "json").stdout)["items"][0]["metadata"]["name"]
    reads = [
        ["get", "pods", "-A"], ["get", "pods", "-A", "-o", "wide"], ["get", "pods", "-A", "-o", "json"],
        ["get", "pods", "-A", "-o", "yaml"], ["get", "pods", "-A", "-o", "name"],
        ["get", "pods", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}"],
        ["get", "pods", "-A", "--show-labels"], ["get", "pods", "-A", "--chunk-size=1", "-o", "json"], ["get", "events", "-A"], ["get", "events", "-A", "-o", "wide"],
        ["get", "events", "-A", "-o", "json"], ["get", "events.events.k8s.io", "-A", "-o", "yaml"],
        ["get", "all", "-A"], ["get", "ns"], ["get", "ns", "-o", "yaml"], ["describe", "node", node],
        ["describe", "pod", "web", "-n", ns], ["get", "--raw", "/api/v1/pods"], ["get", "--raw", "/api/v1/events"],
        ["get", "--raw", "/api/v1/namespaces"], ["get", "pv,pvc", "-A"], ["api-resources"],
        ["auth", "can-i", "--list"], ["auth", "whoami"],
    ]
    for args in reads:
        out = kubectl(scene, *args)
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr}"
        text = out.stdout + out.stderr
        assert not shows_hidden(text, hidden_pod), f"kubectl {' '.join(args)} shows the fault plane:\n{text}"
    # the reads did see the cluster: the app's pod, other namespaces' pods, the node's pod list
    assert f"{ns}/web" in kubectl(scene, *reads[5]).stdout
    assert "kube-system" in kubectl(scene, "get", "pods", "-A").stdout
    assert "web" in kubectl(scene, "describe", "node", node).stdout
    assert "system:serviceaccount:" + ns + ":sre-oncall" in kubectl(scene, "auth", "whoami").stdout


def test_the_hidden_namespace_answers_as_a_missing_one(scene) -> None:
    hidden_pod, missing = scene["hidden_pod"], f"missing-{uuid.uuid4().hex[:6]}"
    pairs = [
        (["get", "pods", "-n", HIDDEN_NAMESPACE], ["get", "pods", "-n", missing]),
        (["get", "all", "-n", HIDDEN_NAMESPACE, "-o", "json"], ["get", "all", "-n", missing, "-o", "json"]),
        (["get", "ns", HIDDEN_NAMESPACE], ["get", "ns", missing]),
        (["get", "--raw", f"/api/v1/namespaces/{HIDDEN_NAMESPACE}/pods"], ["get", "--raw", f"/api/v1/namespaces/{missing}/pods"]),
        (["logs", hidden_pod, "-n", HIDDEN_NAMESPACE], ["logs", hidden_pod, "-n", missing]),
        (["exec", hidden_pod, "-n", HIDDEN_NAMESPACE, "--", "true"], ["exec", hidden_pod, "-n", missing, "--", "true"]),
        (["describe", "pod", hidden_pod, "-n", HIDDEN_NAMESPACE], ["describe", "pod", hidden_pod, "-n", missing]),
        (["auth", "can-i", "--list", "-n", HIDDEN_NAMESPACE], ["auth", "can-i", "--list", "-n", missing]),
    ]
    for hidden_args, missing_args in pairs:
        got, want = kubectl(scene, *hidden_args), kubectl(scene, *missing_args)
        norm = lambda s: "\n".join(line for line in s.replace(missing, HIDDEN_NAMESPACE).splitlines()
                                   if '"resourceVersion"' not in line)  # noqa: E731
        assert (got.returncode, norm(got.stdout), norm(got.stderr)) == (want.returncode, norm(want.stdout), norm(want.stderr)), \
            f"kubectl {' '.join(hidden_args)}: {got.stdout}{got.stderr} vs {want.stdout}{want.stderr}"
        assert hidden_pod not in got.stdout and "NotFound" not in got.stdout


def test_watch_streams_carry_no_hidden_events(scene, cluster) -> None:
    ns, hidden_pod = scene["ns"], scene["hidden_pod"]
    patch = {"metadata": {"labels": {"touched": uuid.uuid4().hex[:6]}}}
    watchers = [subprocess.Popen([kubectl_path(), "--kubeconfig", str(scene["kubeconfig"]), *args,
                                  "--request-timeout=5s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for args in (["get", "pods", "-A", "--watch"], ["get", "pods", "-A", "--watch", "-o", "json"],
                             ["get", "events", "-A", "--watch"])]
    time.sleep(1.5)  # let the watches open, then change both pods
    cluster.kube.core.patch_namespaced_pod(hidden_pod, HIDDEN_NAMESPACE, patch)
    cluster.kube.core.patch_namespaced_pod("web", ns, patch)
    outputs = [w.communicate(timeout=20) for w in watchers]
    for out, err in outputs:
        assert not shows_hidden(out + err, hidden_pod), out + err
    assert "web" in outputs[0][0] and f'"namespace": "{ns}"' in outputs[1][0]


def test_exec_and_logs_work_in_the_app_namespace(scene) -> None:
    ns = scene["ns"]
    out = kubectl(scene, "exec", "web", "-n", ns, "--", "sh", "-c", "echo from-inside")
    assert out.returncode == 0 and out.stdout.strip() == "from-inside", out.stderr
    logs = kubectl(scene, "logs", "web", "-n", ns, "--tail=1")
    assert logs.returncode == 0 and "tick" in logs.stdout


def test_the_agent_cannot_claim_another_identity(scene) -> None:
    ns, hidden_pod = scene["ns"], scene["hidden_pod"]
    for extra in (["--as=system:admin"], ["--as=system:admin", "--as-group=system:masters"],
                  ["--as=system:serviceaccount:kube-system:default"]):
        whoami = kubectl(scene, *extra, "auth", "whoami", "-o", "json")
        assert json.loads(whoami.stdout)["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:sre-oncall"
        secrets = kubectl(scene, *extra, "get", "secrets", "-n", "kube-system")
        assert secrets.returncode != 0 and "forbidden" in secrets.stderr.lower()
        hidden = kubectl(scene, *extra, "get", "pods", "-n", HIDDEN_NAMESPACE)
        assert hidden_pod not in hidden.stdout + hidden.stderr


def test_no_credential_the_agent_holds_opens_the_api_server(scene, cluster) -> None:
    doc = yaml.safe_load(Path(scene["kubeconfig"]).read_text())
    token = doc["users"][0]["user"]["token"]
    assert set(doc["users"][0]["user"]) == {"token"}
    api = cluster.kube.api_client.configuration
    ctx = ssl.create_default_context(cafile=api.ssl_ca_cert) if api.ssl_ca_cert else ssl._create_unverified_context()  # noqa: S323
    request = urllib.request.Request(f"{api.host}/api/v1/namespaces/{scene['ns']}/pods",
                                     headers={"Authorization": f"Bearer {token}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, context=ctx, timeout=10)  # noqa: S310 - the test cluster
    assert refused.value.code == 401
    # and the proxy refuses anything but its own token
    proxy = scene["proxy"]
    pctx = ssl.create_default_context(cadata=proxy.ca_data.decode())
    for auth in ("", "Bearer " + token[:-1], "Bearer " + (api.api_key or {}).get("authorization", "x")):
        bad = urllib.request.Request(f"{proxy.url}/api/v1/pods", headers={"Authorization": auth} if auth else {})
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(bad, context=pctx, timeout=10)  # noqa: S310 - our proxy
        assert denied.value.code == 401


def test_pods_reach_the_proxy_and_trust_its_certificate(scene) -> None:
    """A sandbox pod will use this kubeconfig: the proxy's address and CA must work from a pod."""
    proxy, ns = scene["proxy"], scene["ns"]
    script = ("import json, ssl, sys, urllib.request\n"
              "url, token, ca = sys.stdin.read().split('\\n', 2)\n"
              "ctx = ssl.create_default_context(cadata=ca)\n"
              "req = urllib.request.Request(url, headers={'Authorization': 'Bearer ' + token})\n"
              "print(json.load(urllib.request.urlopen(req, context=ctx, timeout=10))['items'][0]['metadata']['name'])\n")
    out = subprocess.run([kubectl_path(), "--kubeconfig", str(scene["kubeconfig"]), "exec", "-i", "web", "-n", ns,
                          "--", "python3", "-c", script],
                         input=f"{proxy.url}/api/v1/namespaces/{ns}/pods\n{proxy.token}\n{proxy.ca_data.decode()}",
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.strip() == "web", out.stderr
