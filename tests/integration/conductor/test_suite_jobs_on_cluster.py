"""The jobs executor for real: a suite's cells run as Kubernetes Jobs from the suite-runner image,
two at once (the same tiny app in two slot namespaces), each writing its record to the results
folder (mounted from this host, the local cluster's one node). One cell's process is SIGKILLed
after its fault took effect (a lost pod: no chance to recover or record): its Job fails, the suite undoes the fault from the cell's journal and records
that Kubernetes ended the cell; a resumed suite then runs only that cell.

The cells are conductors in pods, which once reinstalled the shared observability stack without
its NetworkPolicies (issue 15). After they ran, the stack still has its fence at the release the
suite found, and the cells' namespace is admitted by its label. (They run in the node's network,
which the agent's sandbox needs; a conductor pod in its own network is the next test: it deploys the
stack, finds it fenced and up to date, and is admitted; an agent's pod in an app namespace that wears
the conductor label is still refused.)

The problem is the conductor tests' tiny ConfigMap drift with the noop agent."""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from pathlib import Path

import pytest
from rich.console import Console

from sregym.apps import observability, release
from sregym.apps.namespace import ensure_app_namespace
from sregym.cluster.images import build_images
from sregym.cluster.in_cluster import CONDUCTOR_LABEL, CONDUCTOR_LABELS
from sregym.core.constants import OBSERVABILITY_NAMESPACE
from sregym.conductor.suite import SuiteRunner, read_index
from sregym.conductor.suite_jobs import CELLS_DIR, JobCellRunner, JobPod, create_cell_account, job_name
from sregym.core.loader import load_problem_arg
from sregym.core.settings import RunSettings
from sregym.report.records import load_records
from live import local_socket
from polling import eventually

# ci tier: 93 s on 2026-11-26 (57 s the suite-runner image build when the code changed, 36 s for
# three tiny cells); 103 s of setup in CI on 2026-11-29, 39 s once the image kept its dependencies'
# layer (2026-11-29, a code-only change: 78 s for the module); mark it long if CI's budget cannot hold it
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
    # the cells run as `existing` from their pods and never build the agent's sandbox image: build it here
    built = build_images(["workbench", "suite-runner"], provider="local", cluster=cluster.name, socket=socket)
    ns = f"suitejobs-{uuid.uuid4().hex[:6]}"
    core = cluster.kube.core
    remove = create_cell_account(cluster.kube, ns, "suite")
    had_slot = any(n.metadata.name == "tiny-p1" and n.status.phase == "Active" for n in core.list_namespace().items)
    pod = JobPod(namespace=ns, image=built[-1].refs[0], image_pull_policy="Never", service_account="suite",
                 overhead_seconds=240, poll_seconds=2, host_network=True,  # for the agent's sandbox
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


def stack_release(cluster) -> tuple[int, str | None, set[str]]:
    """(helm revision, chart hash, NetworkPolicy names) of the observability stack."""
    proc = release.helm(cluster, "status", observability.RELEASE, "-n", OBSERVABILITY_NAMESPACE, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    revision = json.loads(proc.stdout)["version"]
    _, digest = release.installed(cluster, observability.RELEASE, OBSERVABILITY_NAMESPACE)
    fence = {p.metadata.name for p in
             cluster.kube.networking.list_namespaced_network_policy(OBSERVABILITY_NAMESPACE).items}
    return revision, digest, fence


def refused_from_a_pod_labelled_as_a_conductor(cluster, image: str, namespace: str) -> str:
    """What a pod the agent could make (its app namespace, the conductor label on its pod) gets from
    Prometheus's own API: its outcome, one line."""
    name = f"conductor-lookalike-{uuid.uuid4().hex[:6]}"
    probe = ("import urllib.request\n"
             "try:\n"
             f"    urllib.request.urlopen('{observability.service_urls()['prometheus']}/api/v1/status/config',"
             " timeout=5); print('OUTCOME open')\n"
             "except Exception as e:\n"
             "    print('OUTCOME', type(getattr(e, 'reason', e)).__name__)\n")
    core = cluster.kube.core
    core.create_namespaced_pod(namespace, {
        "metadata": {"name": name, "labels": dict(CONDUCTOR_LABELS)},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Never",
                                                            "command": ["python3", "-c", probe]}]}})
    try:
        eventually(lambda: core.read_namespaced_pod(name, namespace).status.phase in ("Succeeded", "Failed"),
                   timeout=90, every=1, what="the probe pod to finish")
        return next(line for line in core.read_namespaced_pod_log(name, namespace).splitlines()
                    if line.startswith("OUTCOME"))
    finally:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def test_two_cells_run_as_jobs_at_once_and_a_killed_cell_is_cleaned_and_rerun(cluster, lab, tmp_path):
    observability.deploy_observability(cluster)  # as this host's conductor installs it: fenced
    before = stack_release(cluster)
    assert {"prometheus", "trace-store", "log-query"} <= before[2], before
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
    # the cells (conductors in pods, off the host's network) found the stack at their own chart hash
    # and left it as it was: same release revision, fence on; their namespace is admitted by label
    assert stack_release(cluster) == before
    assert cluster.kube.core.read_namespace(lab.namespace).metadata.labels.get(CONDUCTOR_LABEL) == "true"
    # resumed with --retry-errors: only the killed cell runs again, and completes
    again = runner(cluster, lab, out, retry_errors=True).run(resume=True)
    assert again.skipped == 1 and again.statuses == {"completed": 1}, again.errors
    last = read_index(out)[-1]
    assert (last["seed"], last["status"]) == (1, "completed")


def test_a_conductor_pod_in_its_own_network_is_admitted_and_keeps_the_fence_an_agent_lookalike_is_refused(
        cluster, lab):
    """`sregym observability deploy` in a pod (no kubeconfig given: it writes its own from the
    ServiceAccount; no hostNetwork): it labels its namespace, reaches the stack by its Services through
    the fence, and reuses the release as it is. A pod of an app namespace with the conductor label on
    itself (what the agent can make) is refused."""
    observability.deploy_observability(cluster)
    before = stack_release(cluster)
    core, name = cluster.kube.core, f"conductor-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod(lab.namespace, {
        "metadata": {"name": name, "labels": dict(CONDUCTOR_LABELS)},
        "spec": {"restartPolicy": "Never", "serviceAccountName": lab.service_account,
                 "containers": [{"name": "c", "image": lab.image, "imagePullPolicy": "Never",
                                 "command": ["sregym", "observability", "deploy", "--timeout", "120"]}]}})
    eventually(lambda: core.read_namespaced_pod(name, lab.namespace).status.phase in ("Succeeded", "Failed"),
               timeout=180, every=2, what="the conductor pod to finish")
    log = core.read_namespaced_pod_log(name, lab.namespace)
    assert core.read_namespaced_pod(name, lab.namespace).status.phase == "Succeeded", log
    assert "already up to date" in log and f"prometheus.{OBSERVABILITY_NAMESPACE}.svc" in log, log  # by its Services
    assert stack_release(cluster) == before  # not reinstalled: same revision, the fence on
    assert cluster.kube.core.read_namespace(lab.namespace).metadata.labels.get(CONDUCTOR_LABEL) == "true"
    app_ns = f"lookalike-{uuid.uuid4().hex[:6]}"
    ensure_app_namespace(cluster, app_ns)
    try:
        outcome = refused_from_a_pod_labelled_as_a_conductor(cluster, lab.image, app_ns)
    finally:
        core.delete_namespace(app_ns)
    assert outcome in {"OUTCOME ConnectionRefusedError", "OUTCOME TimeoutError"}, outcome  # not open, not a name error
