"""The nightly chart for real: the suite-runner image (sregym, helm, kubectl) is built and loaded,
the chart is installed, one night is started from its CronJob, and that night's Job runs a suite
inside the cluster with the in-cluster service account, then writes records, a report and the
leaderboard to the results volume.

The suite is the conductor tests' tiny problem (a ConfigMap drift on a one-pod app) with the noop
agent, given to the chart as the lab's own problems and charts from ConfigMaps."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from sregym.cluster.images import build_images
from sregym.cluster.kube import helm_path
from sregym.core.record import RunRecord
from live import local_socket
from polling import eventually

pytestmark = [pytest.mark.cluster, pytest.mark.long]  # an image build and a whole night: minutes

ROOT = Path(__file__).parents[3]
CHART = ROOT / "charts" / "nightly"
TINY = ROOT / "tests" / "integration" / "conductor"
SUITE = {"name": "tiny", "description": "one ConfigMap drift on a one-pod app", "problems": ["tiny_settings_drift"],
         "seeds": 1}


def config_map(core, ns: str, name: str, files: dict[str, Path | str]) -> list[dict]:
    """A ConfigMap holding ``files`` (path in the volume -> file or text) and the volume items
    that lay them out again as folders."""
    data, items = {}, []
    for i, (path, source) in enumerate(files.items()):
        key = f"f{i}-{Path(path).name}"
        data[key] = source.read_text() if isinstance(source, Path) else source
        items.append({"key": key, "path": path})
    core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data=data))
    return items


@pytest.fixture(scope="module")
def night(cluster, tmp_path_factory):
    """One night of the chart, run to its end; yields (namespace, job logs, results dir or None)."""
    socket = local_socket(cluster)
    if socket is None and cluster.provider != "kind":
        pytest.skip("the suite-runner image can be loaded only into the local or a kind cluster")
    built = build_images(["suite-runner"], provider="local" if socket else "kind", cluster=cluster.name,
                         socket=socket)
    repository, tag = built[-1].refs[0].rsplit(":", 1)
    ns = f"nightly-{uuid.uuid4().hex[:6]}"
    core = cluster.kube.core
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        problem_items = config_map(core, ns, "lab-problems", {
            "tiny_settings_drift.yaml": TINY / "problems" / "tiny_settings_drift.yaml",
            "suites/tiny.yaml": yaml.safe_dump(SUITE)})
        chart = TINY / "charts" / "tinyapp"
        chart_items = config_map(core, ns, "lab-charts", {
            f"tinyapp/{p.relative_to(chart)}": p for p in sorted(chart.rglob("*")) if p.is_file()})
        values = {
            "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
            "suite": "tiny", "agents": ["noop"], "seeds": 1, "noise": "off",
            "extraArgs": ["--problems-dir", "/lab/problems", "--charts-dir", "/lab/charts",
                          "--baseline-window", "1", "--grade-window", "3", "--budget-seconds", "30"],
            "extraVolumes": [{"name": "problems", "configMap": {"name": "lab-problems", "items": problem_items}},
                             {"name": "charts", "configMap": {"name": "lab-charts", "items": chart_items}}],
            "extraVolumeMounts": [{"name": "problems", "mountPath": "/lab/problems"},
                                  {"name": "charts", "mountPath": "/lab/charts"}],
            "results": {"size": "1Gi"},
        }
        values_file = tmp_path_factory.mktemp("nightly") / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        subprocess.run([helm_path(), "install", "night", str(CHART), "-n", ns, "-f", str(values_file),
                        "--kubeconfig", str(cluster.kubeconfig), "--wait", "--timeout", "2m"],
                       check=True, capture_output=True, text=True, timeout=180)
        cronjob = cluster.kube.kubectl("-n", ns, "get", "cronjob", "-o", "name").stdout.strip()
        cluster.kube.kubectl("-n", ns, "create", "job", "tonight", f"--from={cronjob}")

        def ended() -> str:
            job = cluster.kube.batch.read_namespaced_job("tonight", ns)
            return next((c.type for c in job.status.conditions or [] if c.status == "True"
                         and c.type in ("Complete", "Failed")), "")

        outcome = eventually(ended, timeout=600, every=5, what="the night's Job to end")
        logs = cluster.kube.kubectl("-n", ns, "logs", "job/tonight", "--tail=-1", check=False).stdout
        results = None
        if socket is not None:  # the local class keeps a volume in a folder on this host
            claim = core.list_namespaced_persistent_volume_claim(ns).items[0]
            volume = core.read_persistent_volume(claim.spec.volume_name)
            results = Path(volume.spec.host_path.path)
        yield ns, outcome, logs, results
    finally:
        subprocess.run([helm_path(), "uninstall", "night", "-n", ns, "--kubeconfig", str(cluster.kubeconfig)],
                       capture_output=True, timeout=120)
        core.delete_namespace(ns)


def test_the_night_runs_the_suite_inside_the_cluster_and_ends_well(night):
    _, outcome, logs, _ = night
    assert outcome == "Complete", logs[-3000:]
    assert "Traceback" not in logs, logs[-3000:]


def test_records_report_and_leaderboard_land_on_the_results_volume(night, cluster):
    _, _, logs, results = night
    if results is None:
        pytest.skip("reading the volume from this host needs the local cluster")
    records = [RunRecord.model_validate_json(p.read_text()) for p in (results / "runs").glob("tiny-*/**/*.json")
               if p.name not in ("index.json",) and '"problem_id"' in p.read_text()]
    assert [(r.problem_id, r.agent.name, r.status) for r in records] == [("tiny_settings_drift", "noop", "completed")], logs
    assert records[0].grades.mitigation.passed is False  # the noop agent fixed nothing
    report = next((results / "runs").glob("tiny-*/report"))
    assert (report / "report.md").is_file() and any((report / "figures").glob("*.png"))
    assert (results / "site" / "index.html").is_file()
    # the fault was recovered before the night ended
    cm = cluster.kube.core.read_namespaced_config_map("tiny-settings", "tiny")
    assert cm.data["greeting"] == "hello"
