"""Teardown of what the agent made, through a whole `sregym run` of the tiny test problem: an
external agent (``--agent command``, with only its own kubeconfig) creates a Deployment, a
ConfigMap, a Role and a RoleBinding in the app namespace and edits a release object. Found live
before this existed: a Deployment the agent applied (and could not delete: RBAC) kept running into
the next run. The record lists each object; the created ones are gone after the run. And when the
conductor is SIGKILLed while the agent works (no finally-block teardown), `sregym cleanup` removes
what the agent made, from the snapshot the conductor journaled before the agent started."""

from __future__ import annotations

import copy
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from sregym.core.record import RunRecord

from polling import eventually

HERE = Path(__file__).parent
NAMESPACE = "tiny"
pytestmark = pytest.mark.cluster

LEFTOVERS = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "debug-shell"},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "debug-shell"}},
              "template": {"metadata": {"labels": {"app": "debug-shell"}},
                           "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                    "imagePullPolicy": "Never"}]}}}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "agent-notes"}, "data": {"a": "b"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "keep-me"},
     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "keep-me"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "keep-me"},
     "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": NAMESPACE}]},
]


def run_args(cluster, out: Path, budget_seconds: int) -> list[str]:
    return [sys.executable, "-m", "sregym", "run", "--problem", "tiny_settings_drift", "--agent", "command",
            "--noise", "off", "--seed", "3", "--out", str(out), "--problems-dir", str(HERE / "problems"),
            "--charts-dir", str(HERE / "charts"), "--kubeconfig", str(cluster.kubeconfig),
            "--budget-seconds", str(budget_seconds), "--baseline-window", "1", "--grade-window", "3",
            "--verify-timeout", "30"]


def test_what_the_agent_created_is_recorded_and_removed(cluster, tmp_path):
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": LEFTOVERS})
    # the agent runs in its sandbox pod with its own kubeconfig in KUBECONFIG (no host file reaches
    # it: the manifest travels in its command); it also bumps the release's Deployment (drift)
    script = "sh -c " + shlex.quote(f"printf '%s' {shlex.quote(manifest)} | kubectl -n {NAMESPACE} apply -f - && "
                                    f"kubectl -n {NAMESPACE} annotate deployment tiny note=agent --overwrite")
    env = {**os.environ, "SREGYM_STATE": str(tmp_path / "state"), "SREGYM_AGENT_COMMAND": script}
    out = tmp_path / "runs"
    proc = subprocess.run(run_args(cluster, out, 60), env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = RunRecord.model_validate_json(next(out.glob("*.json")).read_text())
    assert record.trajectory.stop_reason == "submitted", record.trajectory  # the agent's kubectl calls worked
    created = {(o.resource, o.name): o for o in record.agent_objects if o.change == "created"}
    assert set(created) == {("deployments.apps", "debug-shell"), ("configmaps", "agent-notes"),
                            ("roles.rbac.authorization.k8s.io", "keep-me"),
                            ("rolebindings.rbac.authorization.k8s.io", "keep-me")}, record.agent_objects
    assert all(o.removed for o in created.values()), record.agent_objects
    kube = cluster.kube
    for read in (lambda: kube.apps.read_namespaced_deployment("debug-shell", NAMESPACE),
                 lambda: kube.core.read_namespaced_config_map("agent-notes", NAMESPACE),
                 lambda: kube.rbac.read_namespaced_role("keep-me", NAMESPACE),
                 lambda: kube.rbac.read_namespaced_role_binding("keep-me", NAMESPACE)):
        with pytest.raises(ApiException) as e:
            read()
        assert e.value.status == 404
    assert not kube.core.list_namespaced_pod(NAMESPACE, label_selector="app=debug-shell").items
    # the release's own objects stay; the agent's edit of one is reported (the next deploy resets it)
    assert kube.apps.read_namespaced_deployment("tiny", NAMESPACE)
    assert not [o for o in record.agent_objects if o.name == "tiny" and o.change == "created"]


def test_what_the_agent_created_before_the_conductor_was_killed_is_removed_by_cleanup(cluster, tmp_path):
    """The agent applies a Deployment and keeps working; the conductor is SIGKILLed (its in-memory
    snapshot and its teardown are lost, its helpers live on). `sregym cleanup` must delete it."""
    escalation = copy.deepcopy(LEFTOVERS[0])
    escalation["metadata"]["name"] = "escalation"
    escalation["spec"]["selector"]["matchLabels"]["app"] = "escalation"
    escalation["spec"]["template"]["metadata"]["labels"]["app"] = "escalation"
    script = "sh -c " + shlex.quote(f"printf '%s' {shlex.quote(json.dumps(escalation))} | "
                                    f"kubectl -n {NAMESPACE} apply -f - && sleep 600")
    state = tmp_path / "state"
    env = {**os.environ, "SREGYM_STATE": str(state), "SREGYM_AGENT_COMMAND": script}
    kube = cluster.kube

    def escalation_exists() -> bool:
        try:
            kube.apps.read_namespaced_deployment("escalation", NAMESPACE)
            return True
        except ApiException as e:
            if e.status != 404:
                raise
        assert conductor.poll() is None, f"sregym run ended before the agent applied: {conductor.stderr.read()[-2000:]}"
        return False

    conductor = subprocess.Popen(run_args(cluster, tmp_path / "runs", 300), env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
    try:
        eventually(escalation_exists, 600, 1, what="the agent's Deployment")
        conductor.send_signal(signal.SIGKILL)  # the conductor only: its tool server and proxy live on
        conductor.wait(timeout=30)
    finally:
        if conductor.poll() is None:
            conductor.kill()
            conductor.wait()
    [journal] = list((state / "journal").glob("*.jsonl"))
    ops = [json.loads(line)["op"] for line in journal.read_text().splitlines() if line.strip()]
    assert "before_agent" in ops and "closed" not in ops, ops
    assert kube.apps.read_namespaced_deployment("escalation", NAMESPACE), "the leak this test is about"

    cleanup = [sys.executable, "-m", "sregym", "cleanup", "--kubeconfig", str(cluster.kubeconfig)]
    clean = subprocess.run(cleanup, env=env, capture_output=True, text=True, timeout=600)
    assert clean.returncode == 0, clean.stderr
    assert "deployments.apps/escalation" in clean.stderr.replace("\n", ""), clean.stderr  # in its summary
    with pytest.raises(ApiException) as gone:
        kube.apps.read_namespaced_deployment("escalation", NAMESPACE)
    assert gone.value.status == 404
    assert not kube.core.list_namespaced_pod(NAMESPACE, label_selector="app=escalation").items
    assert kube.apps.read_namespaced_deployment("tiny", NAMESPACE)  # the release's own stays
    cm = kube.core.read_namespaced_config_map("tiny-settings", NAMESPACE)
    assert (cm.data or {}).get("greeting") == "hello"  # and the fault was recovered as before
    assert not list((state / "journal").glob("*.jsonl"))
    again = subprocess.run(cleanup, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "nothing to clean" in again.stderr, again.stderr
