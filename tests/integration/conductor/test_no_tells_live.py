"""Red team, no tells: after faults of different kinds (a field edit, a ConfigMap edit with a rolling
restart, an object created in the namespace), a noise restart and a noise hand edit, run by the conductor's fault
plane, everything the agent can read in the app namespace, with managed fields, carries no label,
annotation or field manager that only the fault plane leaves.

Found by reading the code: created objects carried ``managed-by: node-ops`` and ``node-ops/run``;
every edit left the client library's ``OpenAPI-Generator`` manager on exactly the changed field."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import anyio
import pytest

from sregym.apps.namespace import ensure_app_namespace
from sregym.conductor.faultplane import FaultPlane
from sregym.conductor.journal import Journal, RunHeader
from sregym.core.constants import OWNER_VALUE, RUN_LABEL
from sregym.core.problem import Selector
from sregym.injectors import ABSENT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "injectors"))
from injector_testapp import manifests  # noqa: E402

pytestmark = pytest.mark.cluster

# What the agent can read in its namespace (its Role), as one kubectl get.
READABLE = ("pods,services,endpoints,configmaps,secrets,events,persistentvolumeclaims,serviceaccounts,resourcequotas,"
            "limitranges,deployments,statefulsets,daemonsets,replicasets,controllerrevisions,jobs,cronjobs,"
            "networkpolicies,ingresses,poddisruptionbudgets,horizontalpodautoscalers,endpointslices,roles,rolebindings")
# Managers no person's kubectl and no controller leaves: only a program using the client library.
FAULT_ONLY_MANAGERS = ("OpenAPI-Generator", "python", "sregym")


def tells(items: list[dict], run_id: str) -> list[str]:
    """Each label, annotation or field manager that names the fault plane or its run."""
    out = []
    for obj in items:
        meta = obj["metadata"]
        where = f"{obj['kind']}/{meta['name']}"
        for what in ("labels", "annotations"):
            for k, v in (meta.get(what) or {}).items():
                if RUN_LABEL in k or v == OWNER_VALUE or run_id in k or run_id in str(v):
                    out.append(f"{where} {what[:-1]} {k}={v}")
        for entry in meta.get("managedFields") or []:
            if any(m.lower() in entry.get("manager", "").lower() for m in FAULT_ONLY_MANAGERS):
                out.append(f"{where} field manager {entry['manager']} on {json.dumps(entry.get('fieldsV1'))[:200]}")
    return out


@pytest.fixture
def app_ns(cluster):
    ns = f"tells-{uuid.uuid4().hex[:6]}"
    ensure_app_namespace(cluster, ns)
    # applied as a person would (kubectl's own manager), so every library manager seen later is a fault's
    docs = manifests(ns, "web") + manifests(ns, "peer")
    cluster.kube.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    cluster.kube.kubectl("-n", ns, "rollout", "status", "deployment/web", "deployment/peer", "--timeout=120s")
    yield ns
    cluster.kube.core.delete_namespace(ns)


def test_nothing_the_agent_reads_names_the_fault_plane(cluster, app_ns):
    ns = app_ns
    run_id = f"r-tells-{uuid.uuid4().hex[:6]}"
    journal = Journal(run_id)  # the default folder: `sregym cleanup` finds it if this test is killed
    journal.start(RunHeader(run_id=run_id, problem_id="tells", kubeconfig=str(cluster.kubeconfig),
                            context=cluster.context))
    plane = FaultPlane(journal=journal, kube=cluster.kube, app_namespace=ns, run_id=run_id, run_seed=7,
                       exclude=["web"])
    faults = [
        ("greeting", "env_var", {"name": "GREETING", "value": "bye"}, Selector(kind="Deployment", name="web")),
        ("mode", "config_value", {"key": "mode", "value": "degraded", "restart": ["web"]},
         Selector(kind="ConfigMap", name="web-config")),
        ("limits", "resource_quota", {"how": "limit_range", "name": "defaults"}, Selector(kind="Deployment", name="web")),
    ]

    async def play() -> list[dict]:
        try:
            for key, inj, params, target in faults:
                await plane.start(key=key, kind="fault", injector=inj, params=params, target=target)
            await plane.start(key="noise-1", kind="noise", injector="noise_rolling_restart", params={},
                              target=Selector())
            await plane.start(key="noise-2", kind="noise", injector="noise_manual_edit", params={},
                              target=Selector())
            # the lead-in's hand edit of what faults edit: a variable in a container's env, off the root cause
            await plane.start(key="noise-3", kind="noise", injector="noise_manual_edit", params={"sort": "spec"},
                              target=Selector())
            spec_edits.extend(plane.active["noise-3"].state.edits)
            listed = cluster.kube.kubectl("-n", ns, "get", READABLE, "-o", "json", "--show-managed-fields")
            return json.loads(listed.stdout)["items"]
        finally:
            assert await plane.recover_all() == []
            journal.close()

    spec_edits: list[dict] = []
    items = anyio.run(play)
    kinds = {o["kind"] for o in items}
    assert {"LimitRange", "Deployment", "ConfigMap"} <= kinds  # the faults' objects were really there
    managers = {e["manager"] for o in items for e in o["metadata"].get("managedFields") or []}
    assert {"kubectl-edit", "kubectl-rollout", "kubectl-create"} <= managers  # what a person's kubectl leaves
    assert tells(items, run_id) == []
    (e,) = spec_edits
    assert e["path"][-1] == "env" and e["name"] != "web", e  # rolls pods: never the root cause's
    obj = next(o for o in items if o["kind"] == e["kind"] and o["metadata"]["name"] == e["name"])
    owned = [m["fieldsV1"] for m in obj["metadata"]["managedFields"] if m["manager"] == "kubectl-edit"]
    assert any('"f:env"' in json.dumps(f) for f in owned), owned  # the manager on a spec field, as a fault's
    after = json.loads(cluster.kube.kubectl("-n", ns, "get", e["kind"].lower(), e["name"], "-o", "json").stdout)
    assert after["spec"]["template"]["spec"]["containers"][e["path"][-2]].get("env", "ABSENT") == (
        "ABSENT" if e["before"] == ABSENT else e["before"])  # undone at recovery
