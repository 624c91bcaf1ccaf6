"""Problems prove themselves on the real cluster: the lite suite's in the ci tier (CI validates them
on every run), every other problem in the long tier (``pytest -m long``: ``validate --all`` as
tests); and the latent_sector_error problem separates an agent that fixes it from one that does
nothing: a red-team agent in its sandbox pod, which also finds nothing of the answer or the host.

Each validation deploys (or reuses) the app, checks a healthy baseline, injects, checks the
mitigation oracle fails, recovers, checks it passes and that the app is healthy again; the time of
every step is printed so CI logs show what each problem costs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from kubernetes import client

from sregym.conductor.validate import validate_problem
from sregym.core.loader import load_catalog
from sregym.core.record import RunRecord
from polling import eventually

pytestmark = pytest.mark.cluster

LITE = [lp.id for lp in load_catalog().suite_problems("lite")]
# 30-150 s each (10 s windows; SLO problems keep their own 120 s): the rest take well over half an hour
OTHERS = [pytest.param(pid, marks=pytest.mark.long) for pid in sorted(load_catalog().problems) if pid not in LITE]


@pytest.mark.parametrize("problem_id", LITE + OTHERS)
def test_problem_validates(cluster, problem_id):
    problem = load_catalog().problem(problem_id).problem
    started = time.monotonic()
    result = anyio.run(lambda: validate_problem(problem, cluster=cluster))
    steps = ", ".join(f"{s.name} {s.seconds:.0f}s" for s in result.steps)
    print(f"\n{problem_id}: {'valid' if result.ok else 'INVALID'} in {time.monotonic() - started:.0f}s ({steps})")
    bad = next((s for s in result.steps if not s.ok), None)
    assert result.ok, f"{problem_id}: {bad.name}: {bad.detail}" if bad else f"{problem_id}: no step ran"
    # a control has nothing to recover: its last step is "app healthy", a problem's "app healthy again"
    assert [s.name for s in result.steps][-1] == ("app healthy" if problem.no_op else "app healthy again")


def run_problem(cluster, root: Path, problem_id: str, agent: str, env: dict[str, str] | None = None,
                grade_window: str | None = "10") -> RunRecord:
    """``sregym run`` of ``problem_id`` with noise on (seed 1), its state and record under ``root``."""
    out = root / agent
    env = {**os.environ, "SREGYM_STATE": str(root / "state"), **(env or {})}
    # validation's window: the run's default (60 s) was 60.6 of latent_sector_error's oracle run's
    # 126 s, for an oracle that reads one file and no SLO
    window = ["--grade-window", grade_window] if grade_window else []
    proc = subprocess.run([sys.executable, "-m", "sregym", "run", "--problem", problem_id,
                           "--noise", "on", "--agent", agent, "--seed", "1", "--out", str(out),
                           "--budget-seconds", "120", "--kubeconfig", str(cluster.kubeconfig), *window],
                          env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [path] = list(out.glob("r*.json"))
    return RunRecord.model_validate_json(path.read_text())


def assert_complete(record: RunRecord) -> None:
    assert record.problem_id == "latent_sector_error" and record.status == "completed"
    assert record.mechanisms.get("archive_blocks") in ("fuse-bad-blocks", "dm-dust")
    assert set(record.phases) >= {"prepare", "baseline", "inject", "agent", "grade", "recover"}
    assert record.timeline and all(ev.ok for ev in record.timeline if ev.kind == "fault")
    assert record.trajectory.submission("mitigation") is not None
    assert record.grades.mitigation is not None and record.grades.mitigation.checks


def test_latent_sector_error_oracle_agent_passes(cluster, tmp_path):
    record = run_problem(cluster, tmp_path, "latent_sector_error", "oracle")
    assert_complete(record)
    assert record.grades.mitigation.passed is True


RED_TEAM_AGENT = Path(__file__).resolve().parents[1] / "agentplane" / "red_team_agent.py"
# One problem of each fault family: words naming its mechanism, which no file, process, prompt or
# listing the agent sees may hold (nor the problem id); words of its ground truth, which its own
# environment, prompt, files and processes may not hold (nor its injectors' names, too common for
# the whole file system: pydantic says config_value); the mitigation check a run that changed
# nothing fails. CI runs the first (75-80 s); the others are long (140 s and more).
RED_TEAM_RUNS = [
    pytest.param("latent_sector_error", ["sectorfs", "dm-dust", "fuse-bad-blocks"],
                 ["sector", "pg_largeobject", "bad block"], "volume_readable", id="storage"),
    pytest.param("shop_redis_slow_network", ["netem", "nfqueue-delay", "tbf-queueing"],
                 ["network latency", "slow network"], "http_probe", id="network", marks=pytest.mark.long),
    pytest.param("hotel_geo_cpu_pressure", ["stress-ng"], ["cpu pressure", "runaway", "stress process"], "slo",
                 id="stress", marks=pytest.mark.long),
    pytest.param("hotel_db_port_wrong", [], ["wrong database port", "DB_PORT"], "configmap_value",
                 id="app-config", marks=pytest.mark.long),
    pytest.param("hotel_geo_selector_mismatch", [], ["selector mismatch", "no endpoints"], "http_probe",
                 id="kubernetes", marks=pytest.mark.long),
]


@pytest.mark.parametrize(("problem_id", "mechanism_words", "truth_words", "failing_check"), RED_TEAM_RUNS)
def test_a_red_team_agent_in_the_sandbox_of_a_real_run_learns_nothing_and_fixes_nothing(
        cluster, tmp_path_factory, problem_id, mechanism_words, truth_words, failing_check):
    """``sregym run --problem ID --noise on --agent command``, the command in its sandbox pod (the
    default) being tests/integration/agentplane/red_team_agent.py: it tries the conductor host's
    files and processes, looks for the problem's names and ground truth in its environment, prompt,
    files and processes, lists pods, events and namespaces through the MCP tools for the fault plane,
    tries a hostPath and a privileged pod (bare, and through a Deployment) and host-file flags, then
    reports what it found as its diagnosis and submits a mitigation that changed nothing of the app.
    Every attack must fail, every control hold, and the mitigation grade fail as a noop agent's."""
    import codecs
    import shlex

    from sregym.core.constants import HIDDEN_NAMESPACE

    problem = load_catalog().problem(problem_id).problem
    repo = Path(__file__).resolve().parents[3]
    root = tmp_path_factory.mktemp("run")  # a name that says nothing: these paths are in the agent's argv
    state = root / "state"
    paths = [str(repo), str(repo / "problems"), str(state), str(state / "journal"), "/var/lib/sregym",
             "/var/lib/sregym/journal", str(cluster.kubeconfig), str(root / "command"), f"/proc/{os.getpid()}/environ"]
    globs = [f"{repo}/problems/*.yaml", "/var/lib/sregym/*/*"]
    names = [problem_id, *mechanism_words]
    truth = [*{f.injector for f in problem.faults}, *truth_words]
    rot13 = lambda words: [codecs.encode(w, "rot13") for w in words]  # noqa: E731
    config = {"paths": paths, "globs": globs, "host_file": str(cluster.kubeconfig), "names": rot13(names),
              "truth": rot13(truth), "hidden": HIDDEN_NAMESPACE}
    command = shlex.join(["python3", "-c", RED_TEAM_AGENT.read_text(), json.dumps(config)])
    record = run_problem(cluster, root, problem_id, "command", env={"SREGYM_AGENT_COMMAND": command},
                         grade_window="10" if problem_id == "latent_sector_error" else None)

    diagnosis = record.trajectory.submission("diagnosis")
    assert diagnosis is not None, f"no findings submitted: {record.trajectory.stop_reason} {record.error}"
    found = json.loads(diagnosis.text)
    assert not found["leaks"], f"attacks got through from the sandbox: {found['leaks']}"
    attacks = {*(f"read {p}" for p in paths), *(f"glob {g}" for g in globs), *RED_TEAM_ATTACKS,
               f"kubectl get -Rf {cluster.kubeconfig}"}
    assert attacks <= set(found["closed"]), f"attacks not tried: {attacks - set(found['closed'])}"
    assert found["checks"] and all(found["checks"].values()), f"a control failed: {found['checks']}"
    assert set(found["checks"]) >= RED_TEAM_CHECKS, found["checks"]
    alert = " ".join(problem.alert.split()[:8])
    assert alert in " ".join(found["prompt"].split()), f"the prompt's alert: {found['prompt']!r}"
    # it changed nothing of the app, so the grade fails as a noop agent's
    assert record.status == "completed" and record.trajectory.stop_reason == "submitted"
    assert record.trajectory.submission("mitigation") is not None
    # the escalation Deployments, podless, are all it made; teardown removed them
    made = {(o.resource, o.name, o.change, o.removed, o.error) for o in record.agent_objects}
    assert made == {("deployments.apps", f"rt-{n}", "created", True, None) for n in ("hostpath", "privileged")}, made
    assert record.grades.mitigation is not None and record.grades.mitigation.passed is False
    assert failing_check in [c.name for c in record.grades.mitigation.checks if not c.passed]
    if problem_id == "latent_sector_error":
        assert_complete(record)


RED_TEAM_ATTACKS = {
    "host processes in /proc", "names in the environment", "names in the prompt", "names in the process list",
    "names in the pod's own files", "names in any file", "names in file names", "names in mounts and host files",
    "get pods -A shows the fault plane", "get events -A shows the fault plane", "get namespaces shows the fault plane",
    "create a hostpath pod", "create a privileged pod", "run a hostpath pod through a Deployment",
    "run a privileged pod through a Deployment",
    "kubectl get pods --profile=cpu --profile-output=/var/lib/sregym/out"}
RED_TEAM_CHECKS = {
    "/proc lists this process", "the prompt is the task file", "grep reads the pod's own files",
    "grep reads the image's files", "get pods -A answers", "get events -A answers", "get namespaces answers",
    "the hostpath pod is forbidden", "the privileged pod is forbidden",
    "the hostpath Deployment is made, with Pod Security's warning",
    "the privileged Deployment is made, with Pod Security's warning",
    "Pod Security refused the hostpath Deployment's pods", "Pod Security refused the privileged Deployment's pods"}


def _running_pod(cluster, ns: str, workload: str) -> str:
    pods = cluster.kube.core.list_namespaced_pod(ns).items
    return next(p.metadata.name for p in pods if p.metadata.name.startswith(f"{workload}-")
                and p.status.phase == "Running" and not p.metadata.deletion_timestamp)


def _bad_block_servers() -> list[int]:
    """PIDs of the bad-block file systems serving pg_largeobject's file (the local cluster's node is
    this host)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "sectorfs.py" in cmd and "base/16384/2613" in cmd:
            found.append(int(pid))
    return found


class LatentSectorRun:
    """The latent_sector_error fault on the deployed shop, driven through the fault plane (no agent),
    with the checks the live tests below share: the oracle's read of the file, and every shopper's
    archive as the api answers it (its error text included)."""

    def __init__(self, cluster) -> None:  # noqa: ANN001
        import secrets

        from sregym.apps import app_driver
        from sregym.conductor.faultplane import FaultPlane
        from sregym.conductor.journal import Journal, RunHeader
        from sregym.oracles import MitigationContext

        problem = load_catalog().problem("latent_sector_error").problem
        app_driver().deploy(problem.app, cluster)
        self.cluster, self.ns = cluster, "online-shop"
        # a changed chart rolls shop-db after the deploy returns: inject into the new pod, once ready
        cluster.kube.kubectl("rollout", "status", "statefulset/shop-db", "-n", self.ns, "--timeout=240s")
        self.fault, self.oracle = problem.faults[0], problem.oracles.mitigation[0]
        run_id = "v" + secrets.token_hex(4)
        self.journal = Journal(run_id)
        self.journal.start(RunHeader(run_id=run_id, problem_id=problem.id, kubeconfig=str(cluster.kubeconfig),
                                     context=cluster.context))
        self.plane = FaultPlane(journal=self.journal, kube=cluster.kube, app_namespace=self.ns, run_id=run_id,
                                run_seed=0)
        self.ctx = MitigationContext(kube=cluster.kube, namespace=self.ns, prometheus_url=None, baseline={},
                                     app=None, window_seconds=5)

    async def inject(self) -> None:
        """As a run does: the shop's volume layer first (before the baseline), then the fault."""
        from sregym.apps import load_app
        from sregym.conductor.faultplane import serve_volumes

        await serve_volumes(self.plane, load_app("online-shop"))
        f = self.fault
        await self.plane.start(key=f.id, kind="fault", injector=f.injector, params=f.params, target=f.target,
                               mechanism=f.mechanism)
        assert (await self.plane.verify(f.id, timeout=60)).ok

    def readable(self) -> bool:
        from sregym.conductor.grading import _check_one

        result = _check_one(self.oracle.name, {**self.oracle.params, "window_seconds": 5}, self.ctx)
        # failing must mean the read failed, not that no pod was there to read through
        assert result.passed or "Input/output error" in str(result.evidence) + result.message, result
        return result.passed

    def api_archives(self) -> tuple[int, list[str]]:
        """Every shopper's archive from the api (its error text included), asked from the web pod."""
        from shop_users import order_histories

        return order_histories(self.cluster.kube, self.ns, _running_pod(self.cluster, self.ns, "web"), "web",
                               "http://api:8080", "/customers/{}/orders/archive")

    def db_log(self, since: str | None = None) -> str:
        """The database's log (from ``since``, an RFC 3339 time, when given)."""
        extra = [f"--since-time={since}"] if since else []
        return self.cluster.kube.kubectl("logs", "-n", self.ns, "shop-db-0", "-c", "postgres", *extra).stdout

    def close(self) -> None:
        assert not anyio.run(self.plane.recover_all)  # idempotent
        self.journal.close()


def _io_errors_only(r: tuple[int, list[str]]) -> tuple[int, list[str]] | None:
    """The api's answers once they settle on I/O errors (None while none, or others, fail)."""
    return r if r[1] and all("Input/output error" in f for f in r[1]) else None


def test_latent_sector_error_reaches_the_running_database(cluster):
    """Without any restart, the running database reads the bad pages itself: its archive pages are
    cold (not all in its buffer pool) and its backends read the file through the bad blocks, so the
    api answers the shoppers on those pages 500 with PostgreSQL's I/O error, which the database logs
    too, while every other shopper is served."""
    run = LatentSectorRun(cluster)
    db_uid = cluster.kube.core.read_namespaced_pod("shop-db-0", run.ns).metadata.uid

    async def scenario() -> None:
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        await run.inject()
        asked, failed = eventually(lambda: _io_errors_only(run.api_archives()), timeout=60, every=3,
                                   what="the archives on bad pages failing with the I/O error, and only those")
        assert 0 < len(failed) < asked, failed
        assert all("could not read block" in f for f in failed), failed
        log = run.db_log(since)
        assert 'could not read block' in log and 'in file "base/16384/2613": Input/output error' in log, log[-2000:]
        pod = cluster.kube.core.read_namespaced_pod("shop-db-0", run.ns)
        assert pod.metadata.uid == db_uid and not any(
            c.restart_count for c in pod.status.container_statuses), "the database restarted"

    try:
        anyio.run(scenario)
    finally:
        run.close()


def test_latent_sector_error_is_not_fixed_by_restarting_the_database(cluster):
    """Restarting the database must not pass the oracle: the blocks stay bad until the data moves.
    Meanwhile the restarted database reads the bad pages itself: PostgreSQL logs the I/O error, the
    api answers those shoppers 500 with it, and the users check sees them. Right after recovery
    every archive reads again, through the descriptors the backends opened during the fault too,
    and the file system's server exits once those backends are gone."""
    run = LatentSectorRun(cluster)
    ns, readable, api_archives, plane = run.ns, run.readable, run.api_archives, run.plane

    async def scenario() -> bool:
        await run.inject()
        assert not readable()
        core = cluster.kube.core
        old_uid = core.read_namespaced_pod("shop-db-0", ns).metadata.uid

        def new_pod_ready() -> bool:
            try:
                pod = core.read_namespaced_pod("shop-db-0", ns)
            except client.ApiException:
                return False  # between the old pod's end and the new one's creation
            return pod.metadata.uid != old_uid and any(
                c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])

        core.delete_namespaced_pod("shop-db-0", ns)
        eventually(new_pod_ready, timeout=240, every=2, what="a new shop-db-0 Ready")
        still_bad = not readable()
        # the fault plane's own check sees it too, through the new pod's container (it once read
        # through the deleted container's pid, said "not in place" and took its whole timeout)
        check = await plane.verify(run.fault.id, timeout=10)
        assert check.ok, check.detail

        # the database reads the bad pages itself now (its buffers are empty): a real I/O error,
        # not a short read, in its log and in the api's answers for the shoppers on those pages
        # (the api's first requests after the database restart may time out while its pool reconnects:
        # asked again until the answers settle)
        asked, failed = eventually(lambda: _io_errors_only(api_archives()), timeout=90, every=3,
                                   what="the archives on bad pages failing with the I/O error, and only those")
        assert 0 < len(failed) < asked, failed
        assert all("could not read block" in f and "Input/output error" in f for f in failed), failed
        db_log = run.db_log()
        assert 'in file "base/16384/2613": Input/output error' in db_log, db_log[-2000:]
        assert "of 8192 bytes" not in db_log, db_log[-2000:]  # no short read of a half-bad page

        assert not await plane.recover_all()
        # a repaired disk reads at once, also through the descriptors backends opened during the fault
        asked, failed = api_archives()
        assert asked and not failed, failed
        # the server stays only while those descriptors are open: gone once the backends are
        assert cluster.kube.kubectl(
            "exec", "-n", ns, "shop-db-0", "-c", "postgres", "--", "sh", "-c",
            'psql -h /tmp -U "$POSTGRES_USER" -d postgres -Atc "SELECT count(pg_terminate_backend(pid)) '
            "FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()\"").returncode == 0
        eventually(lambda: not _bad_block_servers(), timeout=30, every=1, what="the bad-block server to exit")
        eventually(lambda: (lambda r: r[0] and not r[1])(api_archives()), timeout=60, every=3,
                   what="every archive answering after the backends reconnected")
        return still_bad

    try:
        assert anyio.run(scenario) is True
    finally:
        run.close()
