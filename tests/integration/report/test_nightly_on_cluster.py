"""The nightly chart for real: the suite-runner image (sregym, helm, kubectl) is built and loaded,
the chart is installed, one night is started from its CronJob, and that night's Job runs a suite
inside the cluster with the in-cluster service account, then writes records, a report and the
leaderboard to the results volume.

The suite is the conductor tests' tiny problem (a ConfigMap drift on a one-pod app) with the noop
agent, given to the chart as the lab's own problems and charts from ConfigMaps."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from sregym.cluster.images import build_images
from sregym.cluster.kube import helm_path
from sregym.conductor.journal import open_journals
from sregym.core.record import RunRecord
from sregym.report.records import load_records
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


@contextmanager
def nightly_release(cluster, tmp: Path, **values) -> Iterator[tuple[str, Path | None]]:
    """The chart installed in a namespace of its own, with the tiny suite given as the lab's own problems
    and charts (``values`` override the defaults); yields (namespace, results volume on this host or
    None). Uninstalled, namespace deleted, afterwards."""
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
            **values,
        }
        values_file = tmp / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        subprocess.run([helm_path(), "install", "night", str(CHART), "-n", ns, "-f", str(values_file),
                        "--kubeconfig", str(cluster.kubeconfig), "--wait", "--timeout", "2m"],
                       check=True, capture_output=True, text=True, timeout=180)

        def volume() -> Path | None:
            if socket is None:
                return None
            claim = core.list_namespaced_persistent_volume_claim(ns).items[0]
            if not claim.spec.volume_name:  # the local class binds when the first pod mounts it
                return None
            return Path(core.read_persistent_volume(claim.spec.volume_name).spec.host_path.path)

        yield ns, volume
    finally:
        subprocess.run([helm_path(), "uninstall", "night", "-n", ns, "--kubeconfig", str(cluster.kubeconfig)],
                       capture_output=True, timeout=120)
        core.delete_namespace(ns)


def start_night(cluster, ns: str, name: str = "tonight") -> None:
    cronjob = cluster.kube.kubectl("-n", ns, "get", "cronjob", "-o", "name").stdout.strip()
    cluster.kube.kubectl("-n", ns, "create", "job", name, f"--from={cronjob}")


def job_ended(cluster, ns: str, name: str = "tonight") -> str:
    job = cluster.kube.batch.read_namespaced_job(name, ns)
    return next((c.type for c in job.status.conditions or [] if c.status == "True"
                 and c.type in ("Complete", "Failed")), "")


@pytest.fixture(scope="module")
def night(cluster, tmp_path_factory):
    """One night of the chart with its defaults (``executor: jobs``), run to its end; yields (namespace,
    outcome, job logs, results dir or None, {cell Job: (outcome, pod spec)})."""
    with nightly_release(cluster, tmp_path_factory.mktemp("nightly")) as (ns, volume):
        start_night(cluster, ns)
        outcome = eventually(lambda: job_ended(cluster, ns), timeout=600, every=5, what="the night's Job to end")
        logs = cluster.kube.kubectl("-n", ns, "logs", "job/tonight", "--tail=-1", check=False).stdout
        cells = {j.metadata.name: (job_ended(cluster, ns, j.metadata.name), j.spec.template.spec)
                 for j in cluster.kube.batch.list_namespaced_job(
                     ns, label_selector="app.kubernetes.io/component=suite-cell").items}
        yield ns, outcome, logs, volume(), cells


def test_the_night_runs_the_suite_inside_the_cluster_and_ends_well(night):
    _, outcome, logs, _, _ = night
    assert outcome == "Complete", logs[-3000:]
    assert "Traceback" not in logs, logs[-3000:]


def test_by_default_the_night_runs_its_cell_as_a_job_of_its_own_in_the_nodes_network(night):
    """The chart's defaults (``executor: jobs``, ``jobs.hostNetwork: true``), live: the suite's one cell
    ran as a Job of its own in the release namespace, which completed."""
    _, _, logs, _, cells = night
    assert [outcome for outcome, _ in cells.values()] == ["Complete"], (cells.keys(), logs[-3000:])
    (spec,) = [spec for _, spec in cells.values()]
    assert spec.host_network is True
    assert spec.containers[0].command == ["sregym", "suite", "cell"]


def test_records_report_and_leaderboard_land_on_the_results_volume(night, cluster):
    _, _, logs, results, _ = night
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


def processes(match) -> list[int]:
    """Pids of this host's processes whose (argv, root folder) ``match`` accepts: a pod's processes are
    this host's, seen through /proc, and their root is the container's."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if match(argv, proc / "root"):
                found.append(int(proc.name))
        except OSError:  # gone, or not ours to read
            continue
    return found


@pytest.mark.parametrize("next_run", ["retry", "next_night"])
def test_a_night_killed_with_its_cell_mid_fault_is_undone_and_rerun_by_the_next_run(cluster, tmp_path, next_run):
    """Issue 20: the night's runner and the cell it runs are SIGKILLed (as on a lost node: no
    SIGTERM, nothing recovered or recorded) once the cell's fault is applied. The chart's next run
    leaves no fault behind: it undoes the cell's open journal, runs the cell again to a record, and
    every journal on the volume is closed. The next run is either the Job's retry (``retry``:
    backoffLimit 1, the same Job's second pod) or, with no retry (backoffLimit 0: tonight's Job fails
    for good), a new Job from the CronJob (``next_night``: its clean-cells step and the resumed suite)."""
    if local_socket(cluster) is None:
        pytest.skip("the cell's processes are killed from the node: the local cluster only")
    # the rest is the chart's defaults: executor jobs, jobs.hostNetwork, retryErrors, parallel 1
    with nightly_release(cluster, tmp_path, backoffLimit=1 if next_run == "retry" else 0) as (ns, volume):
        start_night(cluster, ns)
        results = eventually(volume, timeout=120, every=1, what="the results volume to be bound")

        def applied() -> list[Path]:
            return [j for j in results.glob("runs/tiny-*/cells/*/state/journal/*.jsonl")
                    if '"op":"applied"' in j.read_text().replace(" ", "")]

        journal = eventually(applied, timeout=300, every=0.5, what="the cell's fault to be applied")[0]
        cell = journal.parents[2].name  # runs/<night>/cells/<cell's Job>/state/journal/<run>.jsonl

        def ours(root: Path) -> bool:  # the night's pod of this release, not another chart's
            try:
                return f"namespace: {ns}" in (root / "scripts" / "job-pod.yaml").read_text()
            except OSError:
                return False

        runner = processes(lambda argv, root: (b"/scripts/nightly.sh" in argv or b"run" in argv) and ours(root))
        cells = processes(lambda argv, root: b"cell" in argv and any(cell.encode() in a for a in argv))
        assert runner and cells, f"the night's processes ({runner}) and the cell's ({cells}) were not found"
        for pid in runner + cells:  # the runner first: it must not see its cell end and clean it itself
            os.kill(pid, signal.SIGKILL)
        assert cluster.kube.core.read_namespaced_config_map("tiny-settings", "tiny").data["greeting"] != "hello", \
            "the fault was not in place when the night and its cell were killed"

        if next_run == "retry":
            outcome = eventually(lambda: job_ended(cluster, ns), timeout=420, every=5, what="tonight's retry to end")
            logs = cluster.kube.kubectl("-n", ns, "logs", "job/tonight", "--tail=-1", check=False).stdout
            job = cluster.kube.batch.read_namespaced_job("tonight", ns)
            assert outcome == "Complete" and job.status.failed == 1, (job.status, logs[-3000:])  # killed, then retried
        else:
            assert eventually(lambda: job_ended(cluster, ns), timeout=120, every=2, what="tonight's Job to fail") \
                == "Failed"  # no retry: the fault stays until the next night
            assert cluster.kube.core.read_namespaced_config_map("tiny-settings", "tiny").data["greeting"] != "hello"
            start_night(cluster, ns, "tomorrow")
            outcome = eventually(lambda: job_ended(cluster, ns, "tomorrow"), timeout=420, every=5,
                                 what="the next night's Job to end")
            logs = cluster.kube.kubectl("-n", ns, "logs", "job/tomorrow", "--tail=-1", check=False).stdout
            job = cluster.kube.batch.read_namespaced_job("tomorrow", ns)
            assert outcome == "Complete" and not job.status.failed, (job.status, logs[-3000:])

        assert cluster.kube.core.read_namespaced_config_map("tiny-settings", "tiny").data["greeting"] == "hello"
        left = [j for folder in results.glob("runs/tiny-*/cells/*/state/journal") for j in open_journals(folder)]
        assert not left, f"journals left open: {[j.run_id for j in left]}"
        # the killed cell left no record (nothing was recorded at the kill); the retry ran it to one
        records = load_records(results.glob("runs/tiny-*"))
        assert [(r.problem_id, r.status) for r in records] == [("tiny_settings_drift", "completed")], logs[-3000:]
