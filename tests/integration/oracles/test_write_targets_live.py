"""The grader's reading of a kubectl write against what the real kubectl acts on.

In a scratch namespace of ConfigMaps and scaled-to-zero Deployments, each call runs as the tool
server would run it (the shared grammar's canonical arguments) with ``--dry-run=server -o name``
where the command has them, so kubectl prints every object it would have changed and changes
nothing (``rollout restart`` has no dry run: it restarts the scratch Deployments, which run no
pods). Every object kubectl acted on must be among the grader's targets (or one named after a
target, as the grader's leniency allows); the grader may name more only where kubectl refused a
word (``nope``, ``foreground``).
"""

from __future__ import annotations

import json
import shlex
import time
import uuid

import pytest

from sregym.core.kubectl_args import parse_kubectl
from sregym.core.trajectory import ToolCall
from sregym.oracles._actions import write_targets
from sregym.oracles._names import related

pytestmark = pytest.mark.cluster

OBJECTS = {"geo": "geo", "frontend": "frontend", "search": "search", "geo-config": "geo"}  # name -> app label


def configmap(name: str, app: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"app": app}},
            "data": {"k": "v"}}


def deployment(name: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}}


@pytest.fixture(scope="module")
def namespace(cluster):
    ns = f"grader-{uuid.uuid4().hex[:6]}"
    kube = cluster.kube
    kube.kubectl("create", "namespace", ns)
    items = [configmap(n, app) for n, app in OBJECTS.items()] + [deployment("geo"), deployment("frontend")]
    kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    yield ns
    kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)


CASES = [
    # (the agent's command, stdin, words the grader may name that kubectl refused)
    ("delete cm -lapp=frontend", None, set()),
    ("delete cm -l=app=frontend", None, set()),
    ("delete cm -l app!=geo", None, set()),
    ("delete cm geo frontend", None, set()),
    ("delete cm/geo cm/frontend", None, set()),
    ("delete cm,deploy frontend", None, set()),
    ("delete cm -- frontend", None, set()),
    ("delete cm frontend --cascade foreground", None, {"foreground"}),
    ("delete cm frontend nope", None, {"nope"}),
    ("delete cm --field-selector metadata.name=frontend", None, set()),
    ("delete cm -l 'app in (geo, frontend)'", None, set()),
    ("delete cm -l app=frontend -l app=geo", None, set()),
    ("--request-timeout 30s delete cm frontend --grace-period 0", None, set()),
    ("label cm frontend team=geo", None, set()),
    ("annotate cm/frontend geo=1 --overwrite", None, set()),
    ("label cm -l app=frontend tier=x", None, set()),
    ("apply -f -", json.dumps(configmap("geo-config", "geo")) + "\n" + json.dumps(configmap("frontend", "x")), set()),
    ("apply -f - -l app=geo", "---\n".join(json.dumps(configmap(n, a)) for n, a in (("frontend", "geo"),
                                                                                      ("search", "search"))),
     {"search"}),
    ("scale --replicas 0 deploy/frontend", None, set()),
    ("scale deploy geo --current-replicas 0 --replicas 0", None, set()),
    ("set env deploy/frontend GEO_ADDR=geo:8083", None, set()),
    ("set image deploy/frontend main=registry.k8s.io/pause:3.10", None, set()),
    ("rollout restart deploy geo frontend", None, set()),
    ("rollout restart deploy", None, set()),
]


def run_as_served(cluster, namespace: str, command: str, stdin: str | None) -> tuple[ToolCall, set[str]]:
    """Run the call as the tool server would; (the call as recorded, the objects kubectl printed)."""
    words = shlex.split(command)
    restart = command.startswith("rollout")
    if restart:
        time.sleep(1.1)  # kubectl refuses a second restart of an object within the same second
    extra = ["-o", "name"] if restart else ["--dry-run=server", "-o", "name"]
    at = words.index("--") if "--" in words else len(words)
    words = ["-n", namespace, *words[:at], *extra, *words[at:]]
    call = parse_kubectl(words, stdin=stdin)
    done = cluster.kube.kubectl(*call.args, check=False, input=stdin)
    acted = {line.split()[0].split("/", 1)[1] for line in done.stdout.splitlines() if "/" in line.split()[0]}
    recorded = ToolCall(t=1, tool="kubectl", arguments={"command": words, **({"stdin": stdin} if stdin else {})},
                        verb=call.verb, read_only=call.read_only, error=done.stderr or None)
    return recorded, acted


@pytest.mark.parametrize("command, stdin, refused", CASES, ids=[c[0] for c in CASES])
def test_the_grader_names_every_object_kubectl_acts_on(cluster, namespace, command, stdin, refused) -> None:
    recorded, acted = run_as_served(cluster, namespace, command, stdin)
    assert acted, f"kubectl acted on nothing: {recorded.error}"
    targets = write_targets(recorded)
    if targets == ["*"]:
        return  # everything of a kind: nothing kubectl did can be outside it
    assert all(any(related(name, t) for t in targets) for name in acted), (acted, targets)
    assert set(targets) - acted <= refused | {OBJECTS[n] for n in acted}, (acted, targets)
