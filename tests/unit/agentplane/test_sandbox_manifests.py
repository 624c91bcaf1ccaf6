"""The sandbox's manifests and addresses (pure), the workbench image's contents, and the journal entry
that lets cleanup delete a killed run's sandbox. The live behaviour is in
tests/integration/agentplane/test_sandbox.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from sregym.agentplane import sandbox as sb
from sregym.cluster.imagebuild import recipes
from sregym.conductor.cleanup import cleanup_run
from sregym.conductor.journal import Journal, RunHeader, read_journal
from sregym.core.errors import UserInputError

REPO = Path(__file__).resolve().parents[3]

KUBECONFIG = textwrap.dedent("""\
    apiVersion: v1
    kind: Config
    clusters: [{name: cluster, cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: Q0E=}}]
    users: [{name: sre, user: {token: t0ken}}]
    contexts: [{name: sre, context: {cluster: cluster, user: sre, namespace: shop}}]
    current-context: sre
    """)


class FakeCore:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def read_namespaced_endpoints(self, name, namespace):
        assert (name, namespace) == ("kubernetes", "default")
        return SimpleNamespace(subsets=[SimpleNamespace(addresses=[SimpleNamespace(ip="10.244.0.1")],
                                                        ports=[SimpleNamespace(port=6443)])])

    def delete_collection_namespaced_pod(self, namespace, grace_period_seconds):
        self.deleted.append(f"pods/{namespace}")

    def delete_namespace(self, name):
        self.deleted.append(f"namespace/{name}")

    def list_namespaced_pod(self, namespace):
        return SimpleNamespace(items=[])

    def list_service_for_all_namespaces(self):
        prom = SimpleNamespace(metadata=SimpleNamespace(namespace="observability"),
                               spec=SimpleNamespace(selector={"app": "prometheus"}, cluster_ip="10.96.5.5",
                                                    ports=[SimpleNamespace(port=9090, node_port=30090,
                                                                           target_port="http", protocol="TCP")]))
        return SimpleNamespace(items=[prom])


def test_a_loopback_server_is_rewritten_to_the_advertised_address_and_others_are_kept() -> None:
    kube = SimpleNamespace(core=FakeCore())
    text, endpoint = sb.pod_reachable_kubeconfig(KUBECONFIG, kube)
    assert endpoint == sb.Endpoint("10.244.0.1", 6443)
    doc = yaml.safe_load(text)
    assert doc["clusters"][0]["cluster"]["server"] == "https://10.244.0.1:6443"
    assert doc["users"][0]["user"]["token"] == "t0ken"  # the identity is the one given
    proxied = KUBECONFIG.replace("https://127.0.0.1:6443", "https://10.244.0.1:7443")
    text, endpoint = sb.pod_reachable_kubeconfig(proxied, kube)
    assert endpoint == sb.Endpoint("10.244.0.1", 7443) and "https://10.244.0.1:7443" in text


def test_an_observability_node_port_is_allowed_as_the_pods_behind_it() -> None:
    kube = SimpleNamespace(core=FakeCore())
    rules = sb.service_peers(kube, sb.url_endpoint("http://10.244.0.1:30090"), {"10.244.0.1"})
    assert rules[0] == {"to": [{"ipBlock": {"cidr": "10.244.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 30090}]}
    assert rules[1]["to"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "observability"}
    assert rules[1]["to"][0]["podSelector"]["matchLabels"] == {"app": "prometheus"}
    assert rules[1]["ports"] == [{"protocol": "TCP", "port": "http"}]
    assert len(sb.service_peers(kube, sb.Endpoint("10.244.0.1", 6443), {"10.244.0.1"})) == 1  # a host process


def test_every_sandbox_pod_is_hardened() -> None:
    pod = sb.pod_manifest("sre-agent", "agent", "sregym/workbench:abc", ["my-agent"], secret="sre-agent",
                          secret_env=["MY_KEY"], deadline_seconds=300)
    spec, container = pod["spec"], pod["spec"]["containers"][0]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert not spec["hostNetwork"] and not spec["hostPID"] and not spec["hostIPC"]
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["activeDeadlineSeconds"] == 300 and spec["restartPolicy"] == "Never"
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert {v["name"] for v in spec["volumes"]} == {"secret", "tmp", "home"}
    assert not any("hostPath" in v for v in spec["volumes"])
    assert {"name": "MY_KEY", "valueFrom": {"secretKeyRef": {"name": "sre-agent", "key": "MY_KEY"}}} in container["env"]
    assert "MY_KEY" not in " ".join(container["command"])
    assert container["imagePullPolicy"] == "Never"
    assert sb.pull_policy("ghcr.io/me/agent:1") == "IfNotPresent"


def test_the_namespace_enforces_pod_security_restricted() -> None:
    labels = sb.namespace_manifest("sre-workbench-abc123")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert sb.new_namespace_name().startswith(sb.NAMESPACE_PREFIX)


def test_network_policies_deny_by_default_and_keep_the_graders_endpoints_from_the_agent() -> None:
    api = [{"to": [{"ipBlock": {"cidr": "10.244.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 6443}]}]
    obs = [{"to": [{"ipBlock": {"cidr": "10.244.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 30090}]}]
    policies = {p["metadata"]["name"]: p["spec"] for p in sb.network_policies(
        api=api, observability=obs, callback=sb.Endpoint("10.244.0.1", 41000), node_ips=["10.244.0.1"],
        model_egress=[("10.244.0.1/32", 8000)])}
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    tools, agent = policies["tools"], policies["agent"]
    assert obs[0] in tools["egress"] and api[0] in tools["egress"]
    assert {"to": [{"ipBlock": {"cidr": "10.244.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 41000}]} \
        in tools["egress"]
    assert obs[0] not in agent["egress"] and api[0] in agent["egress"]
    assert {"to": [{"ipBlock": {"cidr": "10.244.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 8000}]} \
        in agent["egress"]
    assert "ingress" not in agent  # nothing reaches an agent pod
    assert tools["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.244.0.1/32"}}, {"podSelector": {}}]


@pytest.mark.parametrize("bad", ["10.0.0.0/8", "nowhere:80", "10.0.0.1:0", "10.0.0.1:http"])
def test_a_bad_egress_option_is_refused_with_its_name(bad: str) -> None:
    with pytest.raises(UserInputError, match="--agent-egress"):
        sb.parse_egress(bad)


def test_cleanup_deletes_only_journaled_sandbox_namespaces(tmp_path: Path) -> None:
    journal = Journal("r9", tmp_path)
    journal.start(RunHeader(run_id="r9", problem_id="p", pid=2**22 + 1))
    journal.sandbox("sre-workbench-0a1b2c")
    rj = read_journal(journal.path)
    assert rj.sandboxes == ["sre-workbench-0a1b2c"]
    core = FakeCore()
    kube = SimpleNamespace(core=core, kubectl=lambda *a, **k: None)
    result = cleanup_run(rj, kube, directory=tmp_path)
    assert core.deleted == ["pods/sre-workbench-0a1b2c", "namespace/sre-workbench-0a1b2c"], result.errors
    assert "sandbox sre-workbench-0a1b2c" in result.stopped
    with pytest.raises(UserInputError):
        sb.delete_sandbox_namespace(kube, "kube-system")


def test_the_workbench_image_holds_exactly_what_the_tool_server_imports(tmp_path: Path) -> None:
    recipe = recipes.discover(REPO)["workbench"]
    assert not recipe.on_request  # a plain `sregym images build` makes it: every run needs it
    shipped = [dest for _, dest in recipe.extra_files]
    for forbidden in ("problems/", "injectors/", "oracles/", "sregym/conductor", "sregym/injectors",
                      "sregym/oracles", "sregym/core/problem", "sregym/apps"):
        assert not any(forbidden in d for d in shipped), forbidden
    for path, dest in recipe.extra_files:
        (tmp_path / dest).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / dest).write_bytes(path.read_bytes())
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import sregym.agentplane.server, sregym.cluster.kube; "
             "mods = [m.__file__ for n, m in sys.modules.items() if n.startswith('sregym')]; "
             "assert all(f.startswith(sys.argv[1]) for f in mods), mods")
    proc = subprocess.run([sys.executable, "-I", "-c", probe, str(tmp_path / "repo")], capture_output=True, text=True)
    assert proc.returncode == 0, f"the server needs a module the image lacks (add it to context.txt): {proc.stderr}"
