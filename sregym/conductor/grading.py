"""Grade a run: the diagnosis oracle on the submitted text, then the mitigation oracles on the
live system over a window, compared with the baseline, and whether the app still answers its own
requests (no Service or caller rerouted to a stand-in since the baseline). An oracle that crashes
fails its check with the error as evidence; a missing judge leaves the diagnosis ``judged: false``."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.to_thread

from sregym.cluster import in_cluster
from sregym.cluster.dns_answers import read_dns_changes, read_own_dns_changes
from sregym.cluster.entry_path import app_path_changes, read_app_paths
from sregym.cluster.handle import ClusterHandle
from sregym.apps import DeployedApp
from sregym.core.constants import LOADGEN_NAMESPACE
from sregym.core.errors import ClusterError
from sregym.core.problem import Problem
from sregym.core.record import CheckResult, DiagnosisGrade, MitigationGrade
from sregym.core.trajectory import Trajectory
from sregym.oracles import MITIGATION_ORACLES, MitigationContext, complete_grades, stops_on
from sregym.oracles import grade_diagnosis as judge_diagnosis

__all__ = ["complete_grades", "grade_diagnosis", "grade_mitigation", "symptom_lag"]


def _check_one(ref_name: str, raw: dict[str, Any], ctx: MitigationContext) -> CheckResult:
    try:
        cls = MITIGATION_ORACLES.get(ref_name)
        return cls(cls.parse_params(raw), ctx).check()
    except Exception as e:  # noqa: BLE001 - an oracle error is a failed check, with evidence
        return CheckResult(name=ref_name, passed=False, message=f"oracle error: {e}", evidence={"error": str(e)})


def _check_stoppable(ref_name: str, raw: dict[str, Any], ctx: MitigationContext, lost: threading.Event,
                     lost_by: list[str]) -> CheckResult:
    """One oracle whose window ends once ``lost`` is set; a failure of its own sets it. A check
    that ended after another one lost the grade is reported as not finished, never as its own
    verdict on the samples it had."""
    with stops_on(lost):
        result = _check_one(ref_name, raw, ctx)
    if lost.is_set() and lost_by and lost_by[0] != ref_name and not result.message.startswith("oracle error"):
        return result.model_copy(update={
            "passed": False, "message": f"not finished: the grade was lost by {lost_by[0]} "
                                        f"(so far: {result.message})"})
    if not result.passed and not lost.is_set():
        lost_by.append(ref_name)
        lost.set()
    return result


def symptom_lag(problem: Problem) -> float:
    """The longest lag of the problem's mitigation oracles (see ``MitigationOracle.lag_seconds``)."""
    lags = [0.0]
    for ref in problem.oracles.mitigation:
        cls = MITIGATION_ORACLES.get(ref.name)
        lags.append(cls.lag_seconds(cls.parse_params(ref.params)))
    return max(lags)


async def grade_mitigation(problem: Problem, app: DeployedApp, cluster: ClusterHandle, baseline: dict[str, Any],
                           window_s: float, *, stop_when_lost: bool = False) -> MitigationGrade:
    """Run every mitigation oracle concurrently (each watches its own window); all must pass.

    ``stop_when_lost`` (validation only): once one oracle fails, the others' windows end at their
    next sample and they read "not finished"; the verdict is the same, reached without waiting
    out windows that can change nothing. A run keeps every oracle's own verdict (its record and
    reward read them one by one), so it never stops early."""
    ctx = MitigationContext(kube=cluster.kube, namespace=app.namespace, prometheus_url=app.prometheus_url,
                            baseline=baseline, app=app.info, window_seconds=window_s)
    results: list[CheckResult | None] = [None] * len(problem.oracles.mitigation)
    lost, lost_by = threading.Event(), []

    async def one(i: int) -> None:
        ref = problem.oracles.mitigation[i]
        if stop_when_lost:
            results[i] = await anyio.to_thread.run_sync(_check_stoppable, ref.name, ref.params, ctx, lost, lost_by)
        else:
            results[i] = await anyio.to_thread.run_sync(_check_one, ref.name, ref.params, ctx)

    async with anyio.create_task_group() as tg:
        for i in range(len(results)):
            tg.start_soon(one, i)
    checks = [r for r in results if r is not None]
    rerouted = await anyio.to_thread.run_sync(_rerouted, app, cluster, baseline)
    return MitigationGrade(passed=bool(checks) and all(c.passed for c in checks) and not rerouted, checks=checks,
                           rerouted=rerouted)


def _rerouted(app: DeployedApp, cluster: ClusterHandle, baseline: dict[str, Any]) -> list[str]:
    """How the app's requests reach something else than at the baseline, after every oracle's
    window (:func:`sregym.cluster.entry_path.app_path_changes`): a stand-in behind a Service or a
    caller's address, a copy of the faulty component included, satisfies any oracle that asks the
    app a question while the fault stays where it was. Whatever the problem's oracles, such a
    mitigation fails. A baseline recorded before paths were has nothing to compare with; paths
    that cannot be read fail the grade (it cannot say the app answers its own requests)."""
    recorded = baseline.get("paths")
    if not recorded:
        return []
    try:
        live = read_app_paths(cluster.kube, app.namespace, known=recorded.get("services") or ())
    except ClusterError as e:
        return [f"the app's paths could not be read: {e}"]
    # the same reroute through a name: a Corefile that answers a Service's name with a stand-in's
    # address leaves every path above as it was (sregym.cluster.dns_answers)
    try:
        renamed = read_dns_changes(cluster.kube, app.namespace, loadgen_namespace=LOADGEN_NAMESPACE)
        # and the conductor's own way to the SLOs, where it reads Prometheus by a Service's name
        renamed += read_own_dns_changes(cluster.kube, [u for u in [app.prometheus_url] if u],
                                        in_cluster.pod_namespace() or "default")
    except ClusterError as e:
        renamed = [f"the DNS answers of the app's names could not be read: {e}"]
    return app_path_changes(recorded, live) + renamed


def _grade_diagnosis(problem: Problem, trajectory: Trajectory) -> DiagnosisGrade:
    name = problem.oracles.diagnosis.name
    try:
        return judge_diagnosis(problem.oracles.diagnosis, problem.ground_truth, trajectory.submission("diagnosis"))
    except Exception as e:  # noqa: BLE001 - the judge failing must not lose the run
        return DiagnosisGrade(oracle=name, judged=False, errors=[f"{type(e).__name__}: {e}"])


async def grade_diagnosis(problem: Problem, trajectory: Trajectory) -> DiagnosisGrade:
    return await anyio.to_thread.run_sync(_grade_diagnosis, problem, trajectory)
