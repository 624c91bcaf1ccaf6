"""The jobs executor of ``sregym suite run --executor jobs``: each cell runs as a Kubernetes Job.

The suite runner (:class:`sregym.conductor.suite.SuiteRunner`) still decides what runs and when:
the resumable index, the claims and slot namespaces, node Leases and ``--parallel`` (one runner
thread waits on each running Job, so at most ``--parallel`` Jobs run). Only *where* a cell runs
changes: :class:`JobCellRunner` is the runner's run function; it creates one Job for the cell from
the suite-runner image, whose pod runs ``sregym suite cell`` (exactly that cell, in the slot
namespace the runner chose, into the same results folder mounted at the same path), waits for the
Job to end and hands back the record the pod wrote.

Kubernetes enforces the cell's time budget: ``activeDeadlineSeconds`` is the agent's budget plus the
baseline and grading windows, the faults' verify time and a set-up margin. Each cell keeps its
fault journal in its own state folder (``<out>/cells/<job>/state``). A Job that Kubernetes ended,
or whose pod was lost, leaves that journal open: this process undoes it (as ``sregym cleanup``
would) before the cell's claims are given back, so the next Job never meets its faults, and the
cell's error record says that Kubernetes ended it and when. A suite that starts again first waits
for the Jobs a lost predecessor left running, then cleans what they left.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sregym.cluster.in_cluster import CONDUCTOR_LABELS
from sregym.conductor.episode import INDEX_FILE
from sregym.core.errors import ClusterError, UserInputError
from sregym.core.jsonlines import read_json_lines
from sregym.core.problem import Problem
from sregym.core.record import RunRecord
from sregym.core.settings import RunSettings

CELL_LABEL = "sregym.dev/suite-cell"  # value: the results folder's hash (one suite night)
COMPONENT = "suite-cell"
CELLS_DIR = "cells"  # <out>/cells/<job>/{settings.json,state/}


class CellEndedByKubernetes(RuntimeError):
    """Kubernetes ended the cell's Job (its deadline passed, or its pod was lost) before the cell's
    pod wrote a record, or after it recorded the deadline's SIGTERM as an interrupt (``aborted``):
    then ``supersedes_record``, and the suite writes the error record after the pod's."""

    def __init__(self, message: str, *, supersedes_record: bool = False) -> None:
        super().__init__(message)
        self.supersedes_record = supersedes_record


class CellFailed(RuntimeError):
    """The cell's pod ran the cell and recorded an error (the engine's message): counted as a
    failed cell, as the thread executor's engine error is."""


class JobPod(BaseModel):
    """How each cell's Job is built (``--job-pod FILE``, YAML): where it runs, from which image, with
    which service account, and how it reaches the results folder."""

    model_config = ConfigDict(extra="forbid")

    namespace: str = Field("default", description="namespace the cells' Jobs are created in")
    image: str = Field("sregym/suite-runner:latest", description="the suite-runner image (sregym, helm, kubectl)")
    image_pull_policy: str = "IfNotPresent"
    service_account: str = Field("sregym-suite", description="needs cluster-admin-like rights, as the suite has")
    results_claim: str | None = Field(None, description="PVC holding the results folder; none: the folder is "
                                                        "mounted from the node (hostPath; one-node clusters only)")
    results_mount: Path | None = Field(None, description="where results_claim is mounted, here and in each Job "
                                                         "(the results folder lies under it)")
    overhead_seconds: float = Field(600, gt=0, description="deploy, inject and recover time on top of the budgets")
    poll_seconds: float = Field(3.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    env_from_secret: str | None = None
    volumes: list[dict[str, Any]] = Field(default_factory=list, description="more pod volumes (a lab's problems)")
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    resources: dict[str, Any] = Field(default_factory=dict)
    host_network: bool = Field(False, description="run each cell in the node's network namespace: the agent's "
                               "sandbox pods reach the conductor only at an address of a node (the local cluster); "
                               "the observability stack does not need it (its fence admits the cells' pods)")



# -- pure: names, deadline, the Job's spec ---------------------------------------------------------

def results_hash(out_dir: Path) -> str:
    """A short, label-safe name of one results folder (one suite night)."""
    return hashlib.sha256(str(Path(out_dir).absolute()).encode()).hexdigest()[:12]


def job_name(out_dir: Path, problem_id: str, settings: RunSettings) -> str:
    """The cell's Job name: stable for (results folder, agent, problem, seed, noise), so a restarted
    suite finds the Job of the same cell, and neutral (it names neither problem nor fault)."""
    key = f"{Path(out_dir).absolute()}|{settings.agent}|{problem_id}|{settings.seed}|{settings.noise}"
    return f"suite-cell-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def cell_deadline_s(problem: Problem, settings: RunSettings, overhead_s: float) -> int:
    """``activeDeadlineSeconds`` of a cell: the agent's budget, the baseline and grading windows
    (each mitigation oracle watches one, after the grade's settle time), the time each fault has to take effect, and a margin for
    deploying, recovering and writing the record."""
    budget = settings.budget_seconds or problem.budgets.seconds
    oracles = max(1, len(problem.oracles.mitigation))
    total = (budget + settings.baseline_window + settings.grade_settle + settings.grade_window * oracles
             + settings.verify_timeout * max(1, len(problem.faults)) + overhead_s)
    return int(total + 0.999)


def cell_args(*, suite: str, problem_id: str, namespace: str, out_dir: Path, settings_file: Path,
              problems_dirs: list[Path]) -> list[str]:
    """Arguments of ``sregym suite cell`` for one cell (its settings carry agent, seed and noise)."""
    args = ["--suite", suite, "--problem", problem_id, "--namespace", namespace, "--out", str(out_dir),
            "--settings", str(settings_file)]
    for d in problems_dirs:
        args += ["--problems-dir", str(d)]
    return args


def results_volume(pod: JobPod, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The results volume and its mount: the claim at ``results_mount``, or the folder itself from
    the node at the same path (so every path a record or the index names is the same everywhere)."""
    out_dir = Path(out_dir).absolute()
    if pod.results_claim:
        if pod.results_mount is None or not out_dir.is_relative_to(pod.results_mount):
            raise UserInputError(f"--out {out_dir} is not under the results claim's mount ({pod.results_mount})",
                                 hint="set results_mount in the --job-pod file and write the suite under it")
        return ({"name": "results", "persistentVolumeClaim": {"claimName": pod.results_claim}},
                {"name": "results", "mountPath": str(pod.results_mount)})
    return ({"name": "results", "hostPath": {"path": str(out_dir), "type": "DirectoryOrCreate"}},
            {"name": "results", "mountPath": str(out_dir)})


def job_manifest(*, name: str, pod: JobPod, suite: str, problem: Problem, settings: RunSettings, out_dir: Path,
                 settings_file: Path, state_dir: Path, problems_dirs: list[Path]) -> dict[str, Any]:
    """The Job that runs one cell; ``problem`` is already in the cell's slot namespace."""
    volume, mount = results_volume(pod, out_dir)
    env = [{"name": "SREGYM_STATE", "value": str(state_dir)},  # the cell's own journal: cleaned if it is lost
           *({"name": k, "value": v} for k, v in pod.env.items())]
    container: dict[str, Any] = {
        "name": "cell", "image": pod.image, "imagePullPolicy": pod.image_pull_policy,
        # without --kubeconfig, sregym in a pod writes one from its ServiceAccount (sregym.cluster.in_cluster)
        "command": ["sregym", "suite", "cell"],
        "args": cell_args(suite=suite, problem_id=problem.id, namespace=problem.app.namespace or problem.app.name,
                          out_dir=out_dir, settings_file=settings_file, problems_dirs=problems_dirs),
        "env": env, "volumeMounts": [mount, *pod.volume_mounts],
    }
    if pod.env_from_secret:
        container["envFrom"] = [{"secretRef": {"name": pod.env_from_secret}}]
    if pod.resources:
        container["resources"] = pod.resources
    labels = {"app.kubernetes.io/component": COMPONENT, CELL_LABEL: results_hash(out_dir)}
    # the observability stack's fence admits a conductor's pod by this label and its namespace's
    pod_labels = {**labels, **CONDUCTOR_LABELS}
    spec: dict[str, Any] = {"serviceAccountName": pod.service_account, "restartPolicy": "Never",
                            "containers": [container], "volumes": [volume, *pod.volumes]}
    if pod.host_network:
        spec["hostNetwork"], spec["dnsPolicy"] = True, "ClusterFirstWithHostNet"
    if pod.node_selector:
        spec["nodeSelector"] = pod.node_selector
    if pod.tolerations:
        spec["tolerations"] = pod.tolerations
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": pod.namespace, "labels": labels},
        "spec": {
            # a retry would replay a half-run cell over its own faults: a lost cell is cleaned and
            # recorded instead, and `--resume --retry-errors` runs it again
            "backoffLimit": 0,
            "activeDeadlineSeconds": cell_deadline_s(problem, settings, pod.overhead_seconds),
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": pod_labels}, "spec": spec},
        },
    }


def job_outcome(status: dict[str, Any] | None) -> tuple[str, str, str] | None:
    """(``Complete`` or ``Failed``, reason, time) of an ended Job's status; None while it runs."""
    for c in (status or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return c["type"], c.get("reason") or "", str(c.get("lastTransitionTime") or "")
    return None


def kubernetes_ended(reason: str, when: str, deadline_s: int | None) -> str:
    """What a cell's error record says when Kubernetes ended its Job."""
    if reason == "DeadlineExceeded":
        why = f"its Job ran past activeDeadlineSeconds={deadline_s}, the cell's time budget"
    else:
        why = f"its Job failed ({reason or 'pod lost'}) before the cell wrote a record"
    return f"Kubernetes ended the cell at {when or 'an unknown time'}: {why}; its faults were cleaned up"


def cell_record(out_dir: Path, problem_id: str, settings: RunSettings, after: int) -> RunRecord | None:
    """The record the cell's pod wrote: the cell's index lines past the first ``after``."""
    lines = [e for e in read_json_lines(Path(out_dir) / INDEX_FILE, {"agent", "problem_id", "seed", "noise"})
             if (e["agent"], e["problem_id"], int(e["seed"]), bool(e["noise"]))
             == (settings.agent, problem_id, settings.seed, settings.noise)]
    for entry in reversed(lines[after:]):
        path = Path(out_dir) / entry.get("record", "")
        if entry.get("record") and path.is_file():
            return RunRecord.model_validate_json(path.read_text())
    return None


# -- live: create, wait, clean ---------------------------------------------------------------------

def clean_cell_state(kube: Any, state_dir: Path) -> list[str]:
    """Undo what a lost cell left (its open journals in ``state_dir``), as ``sregym cleanup --force``
    would from the cell's own pod. Its processes lived in the lost pod, so none is stopped here (a
    pid journaled there means another process on this host). Returns the errors left."""
    from sregym.conductor.cleanup import cleanup_run
    from sregym.conductor.journal import open_journals

    directory = state_dir / "journal"
    errors: list[str] = []
    for rj in reversed(open_journals(directory) if directory.is_dir() else []):
        rj.helpers.clear()
        result = cleanup_run(rj, kube, directory=directory, force=True)
        errors += [f"{rj.run_id}: {e}" for e in result.errors]
    return errors


class JobCellRunner:
    """The suite runner's run function that plays each cell as a Kubernetes Job (module docstring)."""

    def __init__(self, pod: JobPod, *, problems_dirs: list[Path] = (), kube: Any = None,
                 console: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep,
                 deploy_stack: Callable[[Any], Any] | None = None):
        self.pod, self.problems_dirs, self.kube = pod, [Path(d).absolute() for d in problems_dirs], kube
        self.say, self.sleep = console, sleep
        self.deploy_stack = deploy_stack or (lambda cluster: _deploy_observability(cluster, self.say))
        self._stack_lock, self._stack_ready = threading.Lock(), False

    def ensure_stack(self, cluster: Any) -> None:
        """Install (or find up to date) the shared observability stack once, from this process, before
        the first Job: cells then find it at their own chart hash and reuse it, instead of the first
        cells racing on its helm install."""
        with self._stack_lock:
            if not self._stack_ready:
                self.deploy_stack(cluster)
                self._stack_ready = True

    def before_suite(self, cluster: Any, out_dir: Path) -> None:
        """Called by the suite runner before it schedules: see :meth:`clean_orphans`."""
        errors = self.clean_orphans(self.kube or cluster.kube, out_dir)
        if errors:
            raise ClusterError("undoing what lost cells left failed: " + "; ".join(errors),
                               hint=f"fix the cause and run the suite again (states under {out_dir / CELLS_DIR})")

    def paths(self, out_dir: Path, name: str) -> tuple[Path, Path, Path]:
        folder = Path(out_dir).absolute() / CELLS_DIR / name
        return folder, folder / "settings.json", folder / "state"

    def __call__(self, problem: Problem, settings: RunSettings, *, out_dir: Path, cluster: Any,
                 suite: str) -> RunRecord:
        kube = self.kube or cluster.kube
        self.ensure_stack(cluster)
        out_dir = Path(out_dir).absolute()
        name = job_name(out_dir, problem.id, settings)
        folder, settings_file, state_dir = self.paths(out_dir, name)
        state_dir.mkdir(parents=True, exist_ok=True)
        # the pod's working folder is not ours: folders the settings name are made absolute
        settings = settings.model_copy(update={"plugins": [p.absolute() for p in settings.plugins],
                                               "charts_dirs": [p.absolute() for p in settings.charts_dirs]})
        settings_file.write_text(settings.model_dump_json(indent=2))
        before = len([e for e in read_json_lines(out_dir / INDEX_FILE, {"agent", "problem_id", "seed", "noise"})
                      if (e["agent"], e["problem_id"], int(e["seed"]), bool(e["noise"]))
                      == (settings.agent, problem.id, settings.seed, settings.noise)])
        manifest = job_manifest(name=name, pod=self.pod, suite=suite, problem=problem, settings=settings,
                                out_dir=out_dir, settings_file=settings_file, state_dir=state_dir,
                                problems_dirs=self.problems_dirs)
        self._delete(kube, name)  # an ended Job of this cell from an earlier night of the same folder
        kube.batch.create_namespaced_job(self.pod.namespace, manifest)
        try:
            kind, reason, when = self._wait(kube, name)
        except BaseException:  # Ctrl-C: stop the cell's pod and undo what it left
            self._delete(kube, name)
            self._wait_gone(kube, name)
            clean_cell_state(kube, state_dir)
            raise
        record = cell_record(out_dir, problem.id, settings, before)
        if record is None or kind != "Complete":
            # the pod was stopped before it could recover (deadline) or lost: its faults may be there
            self._wait_pods_gone(kube, name)
            errors = clean_cell_state(kube, state_dir)
        # activeDeadlineSeconds ends the pod with SIGTERM first: the cell takes it as an interrupt,
        # recovers, and records itself "aborted", which alone would not say its time budget ended it
        cut = record is not None and record.status == "aborted" and kind != "Complete"
        if record is not None and not cut:  # the pod ran the cell (and may have been ended just after its record)
            if record.status == "error":
                raise CellFailed(record.error or "the cell ended in an error")
            return record
        message = kubernetes_ended(reason, when, manifest["spec"]["activeDeadlineSeconds"])
        if cut:
            message += f"; its pod recorded the run as aborted ({record.run_id})"
        if errors:
            message += f" (cleanup incomplete: {'; '.join(errors)}; run `sregym cleanup` with SREGYM_STATE={state_dir})"
        raise CellEndedByKubernetes(message, supersedes_record=cut)

    # -- waiting on the API ------------------------------------------------------------------------

    def _wait(self, kube: Any, name: str) -> tuple[str, str, str]:
        from kubernetes.client.exceptions import ApiException

        while True:
            try:
                job = kube.batch.read_namespaced_job_status(name, self.pod.namespace)
            except ApiException as e:
                if e.status == 404:  # someone deleted the Job: the cell is lost
                    return "Failed", "JobDeleted", datetime.now(timezone.utc).isoformat(timespec="seconds")
                raise ClusterError(f"reading Job {self.pod.namespace}/{name}: {e.reason}") from None
            status = kube.api_client.sanitize_for_serialization(job.status) or {}
            ended = job_outcome(status)
            if ended is not None:
                return ended
            self.sleep(self.pod.poll_seconds)

    def _delete(self, kube: Any, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            kube.batch.delete_namespaced_job(name, self.pod.namespace, propagation_policy="Foreground")
        except ApiException as e:
            if e.status != 404:
                raise ClusterError(f"deleting Job {self.pod.namespace}/{name}: {e.reason}") from None
            return
        self._wait_gone(kube, name)

    def _wait_gone(self, kube: Any, name: str, timeout: float = 120) -> None:
        from kubernetes.client.exceptions import ApiException

        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                kube.batch.read_namespaced_job(name, self.pod.namespace)
            except ApiException as e:
                if e.status == 404:
                    return
                raise
            self.sleep(1)

    def _wait_pods_gone(self, kube: Any, name: str, timeout: float = 120) -> None:
        """A Job past its deadline has its pod killed, not yet gone: wait until no process of the
        cell can act any more before undoing what it did."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pods = kube.core.list_namespaced_pod(self.pod.namespace, label_selector=f"job-name={name}").items
            if all(p.status.phase in ("Succeeded", "Failed") for p in pods):
                return
            self.sleep(1)

    def clean_orphans(self, kube: Any, out_dir: Path) -> list[str]:
        """Before a (restarted) suite schedules anything: wait for the cells' Jobs a lost suite left
        running on this results folder, then undo whatever any lost cell left. Returns errors."""
        out_dir = Path(out_dir).absolute()
        selector = f"{CELL_LABEL}={results_hash(out_dir)}"
        while True:
            jobs = kube.batch.list_namespaced_job(self.pod.namespace, label_selector=selector).items
            active = [j.metadata.name for j in jobs
                      if job_outcome(kube.api_client.sanitize_for_serialization(j.status)) is None]
            if not active:
                break
            self.say(f"waiting for {len(active)} cell Job(s) an earlier suite left running: {', '.join(active)}")
            self.sleep(max(self.pod.poll_seconds, 10))
        errors: list[str] = []
        root = out_dir / CELLS_DIR
        for folder in sorted(root.iterdir()) if root.is_dir() else []:
            if re.fullmatch(r"suite-cell-[0-9a-f]{16}", folder.name):
                errors += clean_cell_state(kube, folder / "state")
        return errors


def _deploy_observability(cluster: Any, say: Callable[[str], None]) -> None:
    from sregym.apps.observability import deploy_observability

    deploy_observability(cluster, progress=say)


def load_job_pod(path: Path | None) -> JobPod:
    """The ``--job-pod`` file (YAML), or the defaults; an error names the file, line and field."""
    from sregym.core.loader import read_yaml, validate_model

    if path is None:
        return JobPod()
    data, source = read_yaml(path)
    return validate_model(JobPod, data or {}, source)


def run_cell(problem: Problem, settings: RunSettings, *, namespace: str, suite: str, out_dir: Path, cluster: Any,
             console: Any = None) -> Any:
    """What a cell's pod runs (``sregym suite cell``): exactly this cell, in ``namespace``, into
    ``out_dir``, with the suite runner's record keeping (an error cell is recorded too). The suite
    that created the Job already decided the cell must run, so an earlier error does not skip it."""
    from sregym.conductor.suite import SuiteRunner, with_namespace

    runner = SuiteRunner([with_namespace(problem, namespace)], suite=suite, settings=settings, seeds=[settings.seed],
                         noise=[settings.noise], out_dir=out_dir, cluster=cluster, parallel=1, retry_errors=True,
                         max_consecutive_errors=1, console=console)
    return runner.run(resume=True)


def create_cell_account(kube: Any, namespace: str, service_account: str = "sregym-suite",
                        cluster_role: str = "cluster-admin") -> Callable[[], None]:
    """A namespace and a ServiceAccount bound to ``cluster_role`` for the cells' Jobs, as the nightly
    chart makes them, for a suite driven from outside the cluster (tests, benchmarks). Returns the
    function that removes all three."""
    kube.core.create_namespace({"metadata": {"name": namespace}})
    kube.core.create_namespaced_service_account(namespace, {"metadata": {"name": service_account}})
    binding = f"{namespace}-{service_account}"
    kube.rbac.create_cluster_role_binding({
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]})

    def remove() -> None:
        kube.rbac.delete_cluster_role_binding(binding)
        kube.core.delete_namespace(namespace)

    return remove
