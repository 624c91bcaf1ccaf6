"""Teardown of what the agent made, through a whole `sregym run` of the tiny test problem: an
external agent (``--agent command``, with only its own kubeconfig) creates a Deployment, a
ConfigMap, a Role and a RoleBinding in the app namespace and edits a release object. Found live
before this existed: a Deployment the agent applied (and could not delete: RBAC) kept running into
the next run. The record lists each object; the created ones are gone after the run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from sregym.core.record import RunRecord

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


def test_what_the_agent_created_is_recorded_and_removed(cluster, tmp_path):
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": LEFTOVERS})
    # the agent runs in its sandbox pod with its own kubeconfig in KUBECONFIG (no host file reaches
    # it: the manifest travels in its command); it also bumps the release's Deployment (drift)
    script = "sh -c " + shlex.quote(f"printf '%s' {shlex.quote(manifest)} | kubectl -n {NAMESPACE} apply -f - && "
                                    f"kubectl -n {NAMESPACE} annotate deployment tiny note=agent --overwrite")
    env = {**os.environ, "SREGYM_STATE": str(tmp_path / "state"), "SREGYM_AGENT_COMMAND": script}
    out = tmp_path / "runs"
    args = [sys.executable, "-m", "sregym", "run", "--problem", "tiny_settings_drift", "--agent", "command",
            "--noise", "off", "--seed", "3", "--out", str(out), "--problems-dir", str(HERE / "problems"),
            "--charts-dir", str(HERE / "charts"), "--kubeconfig", str(cluster.kubeconfig), "--budget-seconds", "60",
            "--baseline-window", "1", "--grade-window", "3", "--verify-timeout", "30"]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
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
