"""The jobs executor: the Job built from a cell, scheduling bounded by --parallel, resumption, and a
cell Kubernetes ended (deadline, lost pod) recorded as such with its faults cleaned.

The cluster here is a stand-in for the batch API: a created Job's "pod" runs the cell as
``sregym suite cell`` would (the engine's ``write_record``) after a few status polls, or is ended
by "Kubernetes" without a record."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes.client.exceptions import ApiException
from rich.console import Console

from sregym.conductor.episode import write_record
from sregym.conductor.journal import Journal, RunHeader, open_journals
from sregym.conductor.suite import SuiteRunner, read_index
from sregym.conductor.suite_jobs import (
    CELL_LABEL,
    JobCellRunner,
    JobPod,
    cell_deadline_s,
    job_manifest,
    job_name,
    job_outcome,
    load_job_pod,
    results_hash,
)
from sregym.core.errors import UserInputError
from sregym.core.record import AgentInfo, RunRecord, Versions
from sregym.core.settings import RunSettings
from test_suite_runner import problem


def arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


class FakeCluster:
    """Jobs whose pods run the cell after ``polls`` status reads; ``ended`` maps a problem id to the
    reason Kubernetes ends its Job with instead (``DeadlineExceeded``, ``PodLost``)."""

    def __init__(self, *, polls: int = 2, ended: dict[str, str] | None = None,
                 on_create=None, errors: frozenset[str] = frozenset(), cut: frozenset[str] = frozenset()):
        self.errors = errors  # problem ids whose cell the pod records as an error
        self.cut = cut  # problem ids whose pod records "aborted" (its SIGTERM), then the deadline ends the Job
        self.jobs: dict[str, dict] = {}
        self.left: dict[str, int] = {}
        self.polls, self.ended = polls, ended or {}
        self.created: list[dict] = []
        self.running, self.max_running = 0, 0
        self.lock = threading.Lock()
        self.on_create = on_create
        self.batch, self.core, self.api_client = self, self, SimpleNamespace(sanitize_for_serialization=lambda x: x)
        self.kube = self
        self.stack_deploys: list[int] = []  # how many Jobs existed when the stack was deployed

    def deploy_stack(self, cluster):
        self.stack_deploys.append(len(self.created))

    # batch API
    def create_namespaced_job(self, ns, manifest):
        with self.lock:
            assert manifest["metadata"]["name"] not in self.jobs
            self.jobs[manifest["metadata"]["name"]] = {"manifest": manifest, "status": {}}
            self.left[manifest["metadata"]["name"]] = self.polls
            self.created.append(manifest)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        if self.on_create:
            self.on_create(manifest)

    def read_namespaced_job_status(self, name, ns):
        with self.lock:
            job = self.jobs.get(name)
            if job is None:
                raise ApiException(status=404)
            if not job["status"]:
                self.left[name] -= 1
                if self.left[name] <= 0:
                    self._end(name, job)
            return SimpleNamespace(status=job["status"])

    def _end(self, name, job):
        args = job["manifest"]["spec"]["template"]["spec"]["containers"][0]["args"]
        pid = arg(args, "--problem")
        self.running -= 1
        if pid in self.ended:
            job["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": self.ended[pid],
                                             "lastTransitionTime": "2026-11-26T02:00:00Z"}]}
            return
        settings = RunSettings.model_validate_json(Path(arg(args, "--settings")).read_text())
        rec = RunRecord(run_id=f"r-{name}", problem_id=pid, spec_hash="h", suite=arg(args, "--suite"), app="a",
                        namespace=arg(args, "--namespace"), agent=AgentInfo(name=settings.agent), seed=settings.seed,
                        noise=settings.noise, difficulty="easy", versions=Versions(sregym="0.1.0"))
        if pid in self.errors:
            rec.status, rec.error = "error", "fault did not take effect"
        if pid in self.cut:
            rec.status = "aborted"
        write_record(rec, Path(arg(args, "--out")))
        job["status"] = {"conditions": [{"type": "Failed" if pid in self.errors | self.cut else "Complete",
                                         "status": "True", "lastTransitionTime": "2026-11-26T02:00:00Z",
                                         "reason": "DeadlineExceeded" if pid in self.cut else "BackoffLimitExceeded"}]}

    def read_namespaced_job(self, name, ns):
        if name not in self.jobs:
            raise ApiException(status=404)

    def delete_namespaced_job(self, name, ns, propagation_policy=None):
        if self.jobs.pop(name, None) is None:
            raise ApiException(status=404)

    def list_namespaced_job(self, ns, label_selector=None):
        key, value = label_selector.split("=")
        for name in list(self.jobs):  # the Jobs run on while the suite looks
            self.read_namespaced_job_status(name, ns)
        return SimpleNamespace(items=[
            SimpleNamespace(metadata=SimpleNamespace(name=n), status=j["status"]) for n, j in self.jobs.items()
            if j["manifest"]["metadata"]["labels"].get(key) == value])

    # core API (the pods of an ended Job are gone at once here)
    def list_namespaced_pod(self, ns, label_selector=None):
        return SimpleNamespace(items=[])

    def kubectl(self, *args, **kw):
        return SimpleNamespace(returncode=0, stdout="", stderr="")


def suite(tmp_path, cluster, problems, *, parallel=2, seeds=(0, 1), agent="noop", **kw) -> SuiteRunner:
    run_fn = JobCellRunner(JobPod(namespace="lab", image="sregym/suite-runner:t", poll_seconds=0.01),
                           problems_dirs=[Path("/lab/problems")], kube=cluster, sleep=lambda s: time.sleep(0.002),
                           deploy_stack=cluster.deploy_stack)
    return SuiteRunner(problems, suite="lite", settings=RunSettings(agent=agent, budget_seconds=60), seeds=seeds,
                       noise=[False], out_dir=tmp_path, cluster=cluster, run_fn=run_fn, parallel=parallel,
                       console=Console(file=open("/dev/null", "w")), **kw)


# -- the Job built from a cell ---------------------------------------------------------------------

def manifest_for(tmp_path, pod=None, settings=None, prob=None):
    prob = prob or problem("p1", app="hotel")
    settings = settings or RunSettings(agent="noop", seed=3, noise=False, budget_seconds=100)
    return job_manifest(name=job_name(tmp_path, prob.id, settings), pod=pod or JobPod(namespace="lab", image="i:t",
                        service_account="night"), suite="lite", problem=prob, settings=settings, out_dir=tmp_path,
                        settings_file=tmp_path / "s.json", state_dir=tmp_path / "state",
                        problems_dirs=[Path("/lab/problems")])


def test_the_job_runs_the_cell_from_the_image_with_the_service_account_and_its_state(tmp_path):
    m = manifest_for(tmp_path)
    pod = m["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert m["metadata"]["namespace"] == "lab" and c["image"] == "i:t" and pod["serviceAccountName"] == "night"
    assert pod["restartPolicy"] == "Never" and m["spec"]["backoffLimit"] == 0
    assert c["command"] == ["sregym", "suite", "cell"]  # in a pod, sregym writes its own kubeconfig
    args = c["args"]
    assert (arg(args, "--suite"), arg(args, "--problem"), arg(args, "--namespace")) == ("lite", "p1", "hotel")
    assert arg(args, "--out") == str(tmp_path) and arg(args, "--problems-dir") == "/lab/problems"
    assert {"name": "SREGYM_STATE", "value": str(tmp_path / "state")} in c["env"]
    # the results folder is mounted at the same path, so the index's paths mean the same everywhere
    assert c["volumeMounts"][0]["mountPath"] == str(tmp_path)
    assert pod["volumes"][0]["hostPath"]["path"] == str(tmp_path)
    labels = m["spec"]["template"]["metadata"]["labels"]
    assert labels[CELL_LABEL] == results_hash(tmp_path) == m["metadata"]["labels"][CELL_LABEL]


def test_the_cells_pod_is_a_conductor_the_observability_fence_admits_in_its_own_network(tmp_path):
    """The cell's pod carries the conductor label (its namespace gets the other half when the cell
    deploys the stack), so it queries the stack through the fence without the node's network."""
    from sregym.cluster.in_cluster import CONDUCTOR_LABELS

    m = manifest_for(tmp_path)
    assert "hostNetwork" not in m["spec"]["template"]["spec"]
    assert CONDUCTOR_LABELS.items() <= m["spec"]["template"]["metadata"]["labels"].items()


def test_host_network_puts_the_cell_in_the_nodes_network(tmp_path):
    spec = manifest_for(tmp_path, pod=JobPod(host_network=True))["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"


def test_the_job_name_and_labels_name_neither_the_problem_nor_the_fault(tmp_path):
    prob = problem("disk_latent_sector_error", injector="latent_sector_error")
    m = manifest_for(tmp_path, prob=prob)
    visible = str(m["metadata"]) + str(m["spec"]["template"]["metadata"])
    for word in ("disk", "latent", "sector", "fault", "chaos", "inject"):
        assert word not in visible


def test_the_deadline_is_the_cells_time_budget(tmp_path):
    prob = problem("p1")
    s = RunSettings(budget_seconds=100, baseline_window=10, grade_window=20, verify_timeout=30)
    assert cell_deadline_s(prob, s, 600) == 100 + 10 + 20 + 30 + 600
    # without --budget-seconds the problem's own budget counts
    assert cell_deadline_s(prob, RunSettings(baseline_window=10, grade_window=20, verify_timeout=30), 0) == \
        prob.budgets.seconds + 60
    m = manifest_for(tmp_path, pod=JobPod(overhead_seconds=5), settings=s)
    assert m["spec"]["activeDeadlineSeconds"] == 165
    # a grade that waits for the fix to settle waits inside the cell's time
    assert cell_deadline_s(prob, s.model_copy(update={"grade_settle": 8}), 600) == 100 + 10 + 8 + 20 + 30 + 600


def test_a_results_claim_is_mounted_where_the_suite_writes(tmp_path):
    pod = JobPod(results_claim="night-results", results_mount=tmp_path)
    m = manifest_for(tmp_path / "runs" / "lite-night", pod=pod)
    spec = m["spec"]["template"]["spec"]
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "night-results"
    assert spec["containers"][0]["volumeMounts"][0]["mountPath"] == str(tmp_path)
    with pytest.raises(UserInputError, match="not under"):
        manifest_for(Path("/elsewhere"), pod=pod)


def test_job_pod_file_is_checked_field_by_field(tmp_path):
    f = tmp_path / "pod.yaml"
    f.write_text("namespace: lab\nimage: x:y\nservice_acount: typo\n")
    with pytest.raises(UserInputError, match="service_acount"):
        load_job_pod(f)
    f.write_text("namespace: lab\nimage: x:y\nvolumes: [{name: p, configMap: {name: lab}}]\n")
    assert load_job_pod(f).volumes[0]["name"] == "p"


def test_job_outcome_reads_the_ended_condition():
    assert job_outcome({}) is None and job_outcome({"conditions": [{"type": "Suspended", "status": "True"}]}) is None
    assert job_outcome({"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                                        "lastTransitionTime": "t"}]}) == ("Failed", "DeadlineExceeded", "t")


# -- scheduling and resumption ---------------------------------------------------------------------

def test_parallel_bounds_the_running_jobs_and_every_cell_gets_its_record(tmp_path):
    cluster = FakeCluster(polls=25)
    summary = suite(tmp_path, cluster, [problem("p1", app="a"), problem("p2", app="b"), problem("p3", app="c")],
                    parallel=2).run()
    assert summary.statuses == {"completed": 6}
    assert cluster.max_running == 2 and len(cluster.created) == 6
    assert sorted((e["problem_id"], e["seed"]) for e in read_index(tmp_path)) == \
        [(p, s) for p in ("p1", "p2", "p3") for s in (0, 1)]


def test_the_runner_deploys_the_observability_stack_once_before_the_first_job(tmp_path):
    """Cells started together used to race on the stack's helm install (seen live)."""
    cluster = FakeCluster(polls=5)
    suite(tmp_path, cluster, [problem("p1", app="a"), problem("p2", app="b")], parallel=2).run()
    assert cluster.stack_deploys == [0] and len(cluster.created) == 4


def test_two_cells_of_one_app_run_at_once_in_slot_namespaces(tmp_path):
    cluster = FakeCluster(polls=25)
    suite(tmp_path, cluster, [problem("p1", app="a")], parallel=2).run()
    assert sorted(arg(m["spec"]["template"]["spec"]["containers"][0]["args"], "--namespace")
                  for m in cluster.created) == ["a", "a-p1"]
    assert cluster.max_running == 2


def test_parallel_one_runs_one_job_at_a_time(tmp_path):
    cluster = FakeCluster(polls=2)
    suite(tmp_path, cluster, [problem("p1", app="a"), problem("p2", app="b")], parallel=1).run()
    assert cluster.max_running == 1 and len(cluster.created) == 4


def test_a_restarted_suite_creates_jobs_only_for_the_missing_cells(tmp_path):
    probs = [problem("p1", app="a"), problem("p2", app="b")]
    first = FakeCluster(ended={"p2": "PodLost"})
    suite(tmp_path, first, probs, max_consecutive_errors=9).run()
    second = FakeCluster()
    summary = suite(tmp_path, second, probs).run(resume=True)
    assert summary.ran == 0 and second.created == []  # error cells count as finished
    third = FakeCluster()
    summary = suite(tmp_path, third, probs, retry_errors=True).run(resume=True)
    assert summary.statuses == {"completed": 2}
    assert {arg(m["spec"]["template"]["spec"]["containers"][0]["args"], "--problem") for m in third.created} == {"p2"}


def test_a_restarted_suite_waits_for_the_jobs_a_lost_suite_left_running(tmp_path):
    probs = [problem("p1", app="a")]
    cluster = FakeCluster(polls=4)
    runner = suite(tmp_path, cluster, probs, seeds=(0,))
    # a lost suite's Job of the same cell is still running on this results folder
    settings = RunSettings(agent="noop", seed=0, noise=False, budget_seconds=60)
    (tmp_path / "s.json").write_text(settings.model_dump_json())
    leftover = manifest_for(tmp_path, settings=settings, prob=probs[0])
    cluster.create_namespaced_job("lab", leftover)
    runner.run(resume=True)
    # it was waited for (it wrote its record), so nothing ran twice
    assert len(cluster.created) == 1 and [e["status"] for e in read_index(tmp_path)] == ["completed"]


# -- cells Kubernetes ended ------------------------------------------------------------------------

def open_journal_in(state_dir: Path, run_id: str) -> None:
    j = Journal(run_id, state_dir / "journal")
    j.start(RunHeader(run_id=run_id, problem_id="p1", pid=1))


@pytest.mark.parametrize("reason, says", [("DeadlineExceeded", "activeDeadlineSeconds"), ("PodLost", "PodLost")])
def test_a_cell_kubernetes_ended_is_an_error_record_saying_so_and_its_journal_is_cleaned(tmp_path, reason, says):
    from sregym.report.records import load_records

    def pod_started(manifest):  # the pod got as far as journaling its run, then was ended
        env = {e["name"]: e["value"] for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]}
        open_journal_in(Path(env["SREGYM_STATE"]), f"run-{manifest['metadata']['name'][-6:]}")

    cluster = FakeCluster(ended={"p1": reason}, on_create=pod_started)
    summary = suite(tmp_path, cluster, [problem("p1", app="a")], seeds=(0,), max_consecutive_errors=9).run()
    assert summary.statuses == {"error": 1}
    [record] = load_records([tmp_path])
    assert record.status == "error" and "CellEndedByKubernetes: Kubernetes ended the cell at 2026-11-26T02:00:00Z" \
        in record.error and says in record.error
    assert not any(open_journals(d / "state" / "journal") for d in (tmp_path / "cells").iterdir())
    assert record.namespace == "a"  # where the cell ran


def test_a_cell_cut_by_its_deadline_after_its_pod_recorded_the_interrupt_says_the_deadline_did_it(tmp_path):
    """activeDeadlineSeconds ends a pod with SIGTERM first: the cell takes it as Ctrl-C, recovers, and
    records itself ``aborted``. That record alone would not say that the cell's time budget ended it."""
    from sregym.report.records import load_records

    summary = suite(tmp_path, FakeCluster(cut=frozenset({"p1"})), [problem("p1", app="a")], seeds=(0,),
                    max_consecutive_errors=9).run()
    assert summary.statuses == {"error": 1}
    [record] = load_records([tmp_path])  # the latest line of the cell: the suite's, after the pod's
    assert record.status == "error" and "activeDeadlineSeconds" in record.error, record.error
    assert "its pod recorded the run as aborted (r-" in record.error, record.error
    assert [e["status"] for e in read_index(tmp_path)] == ["aborted", "error"]


def test_an_error_record_names_the_slot_namespace_the_cell_ran_in(tmp_path):
    from sregym.report.records import load_records

    cluster = FakeCluster(ended={"p1": "PodLost"}, polls=25)
    suite(tmp_path, cluster, [problem("p1", app="a")], max_consecutive_errors=9).run()
    assert sorted(r.namespace for r in load_records([tmp_path])) == ["a", "a-p1"]


def test_open_journals_a_lost_suite_left_are_cleaned_before_anything_runs(tmp_path):
    state = tmp_path / "cells" / ("suite-cell-" + "0" * 16) / "state"
    open_journal_in(state, "run-lost")
    assert open_journals(state / "journal")
    suite(tmp_path, FakeCluster(), [problem("p1", app="a")], seeds=(0,)).run(resume=True)
    assert not open_journals(state / "journal")


def test_a_cell_its_pod_recorded_as_an_error_counts_toward_stopping_the_suite(tmp_path):
    cluster = FakeCluster(errors=frozenset({"p1"}))
    with pytest.raises(RuntimeError, match="fault did not take effect"):
        suite(tmp_path, cluster, [problem("p1", app="a")], parallel=1, seeds=(0, 1, 2),
              max_consecutive_errors=2).run()
    index = read_index(tmp_path)
    assert [e["status"] for e in index] == ["error", "error"]  # one line each: the pod's, none added


def test_an_unknown_agent_is_refused_before_any_job_is_created(tmp_path):
    """A typo in --agent used to surface only in the first Job's pod, after the cluster was touched."""
    from sregym.core.errors import UnknownNameError

    cluster = FakeCluster()
    runner = suite(tmp_path, cluster, [problem("p1", app="a")], seeds=(0,), agent="randm")
    with pytest.raises(UnknownNameError) as err:
        runner.run()
    assert cluster.created == [] and not read_index(tmp_path)
    assert "unknown agent 'randm'" in str(err.value)
    assert "random" in err.value.hint and "noop" in err.value.hint and "oracle" in err.value.hint


def test_the_next_night_cleans_what_a_lost_night_left_in_an_earlier_nights_folder(tmp_path, monkeypatch):
    """Each night writes to a folder of its date, and a suite cleans only its own folder's lost cells.
    A night whose runner died with a cell (a lost node) left an open cell journal in its folder:
    ``sregym suite clean-cells`` (the chart's night runs it over every night's folder before its suite)
    waits for that folder's Jobs still running, then undoes it."""
    import sregym.cluster.providers as providers
    from sregym.cli.main import run_cli

    last, tonight = tmp_path / "runs" / "lite-2026-11-26", tmp_path / "runs" / "lite-2026-11-27"
    tonight.mkdir(parents=True)
    state = last / "cells" / ("suite-cell-" + "1" * 16) / "state"
    open_journal_in(state, "run-lost")
    cluster = FakeCluster(polls=3)
    # a cell Job of last night is still running; it must end before its folder is cleaned
    settings = RunSettings(agent="noop", seed=0, noise=False, budget_seconds=60)
    (last / "s.json").write_text(settings.model_dump_json())
    cluster.create_namespaced_job("lab", manifest_for(last, settings=settings, prob=problem("p2", app="a")))
    monkeypatch.setattr(providers, "current_cluster", lambda *a, **kw: SimpleNamespace(kube=cluster))
    pod_file = tmp_path / "job-pod.yaml"
    pod_file.write_text("namespace: lab\npoll_seconds: 0.01\n")
    assert run_cli(["suite", "clean-cells", "--job-pod", str(pod_file), str(last), str(tonight)]) == 0
    assert not open_journals(state / "journal")
    assert all(job_outcome(j["status"]) for j in cluster.jobs.values())


def test_clean_cells_refuses_a_folder_that_is_not_there(tmp_path, capsys):
    from sregym.cli.main import run_cli

    assert run_cli(["suite", "clean-cells", str(tmp_path / "nope")]) == 2
    assert "nope" in capsys.readouterr().err
