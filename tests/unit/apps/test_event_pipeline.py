"""event-pipeline: its queue is run by an operator from a custom resource, and the rights line up:
the agent may edit that CR (and restore the operator's Role, which Kubernetes lets it do only for
rights it holds itself), the operator has no rights outside its namespace."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from sregym.apps import load_app
from sregym.cluster.agent_access import OPERATOR_GROUP, OPERATOR_RESOURCES, app_namespace_rules
from sregym.cluster.charts import template
from sregym.conductor.chart_checks import RenderedChart, check_against_chart
from sregym.core.errors import ProblemFileError
from sregym.core.loader import load_problem_file

pytestmark = pytest.mark.usefixtures("helm")  # tests/unit/apps/conftest.py

PROBLEMS = Path(__file__).resolve().parents[3] / "problems"


def rendered() -> list[dict]:
    spec = load_app("event-pipeline")
    return [d for d in yaml.safe_load_all(template(spec.chart, spec.namespace, {})) if d]


def grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def test_the_queue_is_a_custom_resource_of_the_crd_the_chart_installs():
    crd = yaml.safe_load((load_app("event-pipeline").chart / "crds" / "queueclusters.yaml").read_text())
    assert crd["spec"]["group"] == OPERATOR_GROUP and crd["spec"]["names"]["plural"] in OPERATOR_RESOURCES
    [cr] = [d for d in rendered() if d["kind"] == crd["spec"]["names"]["kind"]]
    assert cr["metadata"]["name"] == "pipeline-queue" and cr["spec"]["replicas"] == 1
    assert not [d for d in rendered() if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "pipeline-queue"]


def test_the_operator_holds_only_a_namespaced_role_that_the_agent_could_restore():
    docs = rendered()
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    [role] = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "queue-operator"]
    # Kubernetes refuses a Role update that grants more than the updater holds: every right the
    # operator has must be one the agent has, or a revoked permission could not be put back
    assert grants(role["rules"]) <= grants(app_namespace_rules())


@pytest.mark.parametrize("problem", ["pipeline_noop_control", "pipeline_queue_cluster_scaled_to_zero",
                                     "pipeline_cache_password_rotated", "pipeline_operator_lost_rbac"])
def test_the_pipeline_problems_name_only_what_the_chart_renders(problem):
    lp = load_problem_file(PROBLEMS / f"{problem}.yaml")
    assert lp.problem.app.name == "event-pipeline"
    check_against_chart(lp, RenderedChart.of("event-pipeline"))


def test_a_workload_the_operator_makes_is_known_by_name_and_kind_only():
    """pipeline-queue is declared in sregym.yaml and made by the operator: a fault may target it by
    kind and name, but a misspelled name, another kind or a container on it is still refused."""
    chart = RenderedChart.of("event-pipeline")
    assert chart.get("StatefulSet", "pipeline-queue") is None and chart.is_operated("StatefulSet", "pipeline-queue")
    lp = load_problem_file(PROBLEMS / "pipeline_operator_lost_rbac.yaml")
    check_against_chart(lp, chart)
    for change, field in [({"name": "pipeline-queu"}, "name"), ({"kind": "Deployment"}, "name"),
                          ({"container": "nats"}, "name")]:
        bad = lp.problem.model_copy(deep=True)
        bad.faults[1].target = bad.faults[1].target.model_copy(update=change)
        with pytest.raises(ProblemFileError, match="chart has no"):
            check_against_chart(dataclasses.replace(lp, problem=bad), chart)


def test_a_statefulset_pod_is_known_by_its_ordinal_name_only():
    """A fault may target a StatefulSet's pod by its stable name (<name>-<ordinal>, e.g. one held in
    Terminating); an ordinal past its replicas, or a Deployment's pod, is refused."""
    chart = RenderedChart.of("event-pipeline")
    assert chart.is_operated("Pod", "pipeline-db-0") and chart.get("Pod", "pipeline-db-0") is None
    lp = load_problem_file(PROBLEMS / "pipeline_db_pod_stuck_terminating.yaml")
    check_against_chart(lp, chart)
    for name in ("pipeline-db-1", "query-0", "pipeline-db"):
        bad = lp.problem.model_copy(deep=True)
        bad.faults[0].target = bad.faults[0].target.model_copy(update={"name": name})
        with pytest.raises(ProblemFileError, match="chart has no Pod"):
            check_against_chart(dataclasses.replace(lp, problem=bad), chart)


def test_deleting_the_app_removes_its_custom_resources_first_while_the_operator_runs(monkeypatch):
    """kopf keeps a finalizer on every QueueCluster it runs a timer for, and only the operator
    removes it: uninstalling the operator and the object together left both the object and the
    namespace terminating for ever (seen live). The objects go first, and are waited for."""
    from sregym.apps import lifecycle, load_app

    spec = load_app("event-pipeline")
    assert lifecycle.chart_custom_resources(spec) == ["queueclusters.pipeline.sregym.io"]
    assert lifecycle.chart_custom_resources(load_app("online-shop")) == []
    order: list[str] = []

    class Kube:
        def kubectl(self, *args, **kw):
            order.append(" ".join(args[:2]))
            return type("P", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    class Core:  # the namespace is gone at once
        def delete_namespace(self, ns):
            order.append(f"delete namespace {ns}")

        def read_namespace(self, ns):
            raise ApiException(status=404)

    Kube.core = Core()

    class Cluster:
        kube, data_dir = Kube(), None

    monkeypatch.setattr(lifecycle.release, "uninstall",
                        lambda cluster, name, ns, wait: order.append(f"uninstall wait={wait}") or False)
    lifecycle.delete(Cluster(), "event-pipeline", timeout=1)
    assert order[:2] == ["delete queueclusters.pipeline.sregym.io", "uninstall wait=True"]
    assert order[-1] == "delete namespace event-pipeline"
    # without waiting (the anti-gaming teardown): the custom resources still go first, waited for by
    # kubectl (--wait=true), and nothing polls the namespace
    order.clear()
    Core.read_namespace = lambda self, ns: order.append("read namespace")
    lifecycle.delete(Cluster(), "event-pipeline", timeout=1, wait=False)
    assert order == ["delete queueclusters.pipeline.sregym.io", "uninstall wait=False",
                     "delete deployment,service,networkpolicy", "delete namespace event-pipeline"]
