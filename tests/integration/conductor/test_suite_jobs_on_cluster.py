"""The jobs executor for real: a suite's cells run as Kubernetes Jobs from the suite-runner image,
two at once (the same tiny app in two slot namespaces), each writing its record to the results
folder (mounted from this host, the local cluster's one node). One cell's process is SIGKILLed
after its fault took effect (a lost pod: no chance to recover or record): its Job fails, the suite undoes the fault from the cell's journal and records
that Kubernetes ended the cell; a resumed suite then runs only that cell.

The problem is the conductor tests' tiny ConfigMap drift with the noop agent."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from pathlib import Path

import pytest
from rich.console import Console

from sregym.cluster.images import build_images
from sregym.conductor.suite import SuiteRunner, read_index
from sregym.conductor.suite_jobs import CELLS_DIR, JobCellRunner, JobPod, create_cell_account, job_name
from sregym.core.loader import load_problem_arg
from sregym.core.settings import RunSettings
from sregym.report.records import load_records
from live import local_socket
from polling import eventually

# ci tier: 93 s on 2026-11-26 (57 s the suite-runner image build when the code changed, 36 s for
# three tiny cells); mark it long if CI's budget cannot hold it
pytestmark = pytest.mark.cluster

HERE = Path(__file__).parent
PROBLEM = "tiny_settings_drift"
SETTINGS = RunSettings(agent="noop", budget_seconds=10, baseline_window=1, grade_window=3, verify_timeout=30,
                       charts_dirs=[HERE / "charts"])


@pytest.fixture(scope="module")
def lab(cluster):
    """(job pod template, namespace) with the suite-runner image loaded and a cluster-admin service
    account; the test folder is mounted into each cell's pod at its own path (problem and chart)."""
    socket = local_socket(cluster)
    if socket is None:
        pytest.skip("the results folder is mounted from this host: the local cluster only")
    built = build_images(["suite-runner"], provider="local", cluster=cluster.name, socket=socket)
    ns = f"suitejobs-{uuid.uuid4().hex[:6]}"
    core = cluster.kube.core
    remove = create_cell_account(cluster.kube, ns, "suite")
    had_slot = any(n.metadata.name == "tiny-p1" and n.status.phase == "Active" for n in core.list_namespace().items)
    pod = JobPod(namespace=ns, image=built[-1].refs[0], image_pull_policy="Never", service_account="suite",
                 overhead_seconds=240, poll_seconds=2, host_network=True,
                 volumes=[{"name": "tests", "hostPath": {"path": str(HERE), "type": "Directory"}}],
                 volume_mounts=[{"name": "tests", "mountPath": str(HERE), "readOnly": True}])
    try:
        yield pod
    finally:
        remove()
        if not had_slot:
            core.delete_namespace("tiny-p1")


def runner(cluster, pod: JobPod, out: Path, **kw) -> SuiteRunner:
    problem = load_problem_arg(PROBLEM, [HERE / "problems"]).problem
    return SuiteRunner([problem], suite="tiny", settings=SETTINGS, seeds=[0, 1], noise=[False], out_dir=out,
                       cluster=cluster, run_fn=JobCellRunner(pod, problems_dirs=[HERE / "problems"]), parallel=2,
                       max_consecutive_errors=5, console=Console(stderr=True), **kw)


def kill_when_applied(cluster, pod: JobPod, out: Path, seed: int, killed: list[str]) -> None:
    """SIGKILL the cell's process (from this host, the node) as soon as its fault is journaled as
    applied: the pod dies as on a lost node, with no chance to recover or record anything."""
    name = job_name(out, PROBLEM, SETTINGS.model_copy(update={"seed": seed, "noise": False}))
    folder = out / CELLS_DIR / name
    journal = folder / "state" / "journal"

    def applied() -> bool:
        return any('"op":"applied"' in p.read_text().replace(" ", "") for p in journal.glob("*.jsonl"))

    eventually(applied, timeout=300, every=0.5, what="the cell's fault to be applied")
    settings_arg = str(folder / "settings.json").encode()
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"cell" in argv and settings_arg in argv and any(a.endswith(b"sregym") for a in argv):
            os.kill(int(proc.name), signal.SIGKILL)
            killed.append(proc.name)


def test_two_cells_run_as_jobs_at_once_and_a_killed_cell_is_cleaned_and_rerun(cluster, lab, tmp_path):
    out = tmp_path / "night"
    killed: list[str] = []
    killer = threading.Thread(target=kill_when_applied, args=(cluster, lab, out, 1, killed), daemon=True)
    killer.start()
    summary = runner(cluster, lab, out).run()
    killer.join(timeout=5)
    assert killed, "the second cell's pod was never killed"
    assert summary.statuses == {"completed": 1, "error": 1}, summary.errors
    records = {r.seed: r for r in load_records([out])}
    assert records[0].status == "completed" and records[0].grades.mitigation.passed is False  # noop fixed nothing
    assert records[1].status == "error" and "Kubernetes ended the cell" in records[1].error, records[1].error
    # both cells were in flight together: one namespace each, the killed one in the app's second slot
    namespaces = {r.namespace for r in records.values()}
    assert namespaces == {"tiny", "tiny-p1"}, namespaces
    jobs = cluster.kube.batch.list_namespaced_job(lab.namespace).items
    spans = sorted((j.status.start_time, max(c.last_transition_time for c in j.status.conditions)) for j in jobs)
    assert len(spans) == 2 and spans[1][0] < spans[0][1], spans  # the second Job started before the first ended
    # the killed cell's fault was undone by the suite, from the cell's own journal
    for ns in namespaces:
        assert cluster.kube.core.read_namespaced_config_map("tiny-settings", ns).data["greeting"] == "hello", ns
    # resumed with --retry-errors: only the killed cell runs again, and completes
    again = runner(cluster, lab, out, retry_errors=True).run(resume=True)
    assert again.skipped == 1 and again.statuses == {"completed": 1}, again.errors
    last = read_index(out)[-1]
    assert (last["seed"], last["status"]) == (1, "completed")
