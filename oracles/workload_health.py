"""``workload_health``: the app's workloads stay available over the whole window.

Sampled, not once: every sample needs each selected Deployment/StatefulSet at its expected
replicas (never below ``min_replicas``, so "scale to zero" is not healthy), no container in
CrashLoopBackOff, and no container restart since the first sample (restart counts are compared
per pod and container, so a pod that restarts and is Running again at the end still fails).

Availability is the readiness probe's word, so it counts only while that probe (and the liveness
and startup probes) are the ones the chart defined: each workload's pod template and each of its
running pods is compared with the probes captured before the fault (``ctx.baseline['probes']``,
else the chart rendered offline), and a removed or loosened probe fails the sample, saying which.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import Field

from sregym.oracles import (CheckResult, MitigationOracle, Sample, WindowParams, container_probes, list_json,
                            mitigation_oracle, pods_matching, sample_window, template, weakened, window_of,
                            window_result, workload_probes)

_BAD_WAITING = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                          "CreateContainerError", "RunContainerError", "InvalidImageName"})


class WorkloadHealthParams(WindowParams):
    workloads: list[str] = Field(default_factory=list, description="names; empty = every Deployment and StatefulSet")
    namespace: str | None = None
    min_replicas: int = Field(1, ge=0, description="no selected workload may run fewer available replicas")
    max_restarts: int = Field(0, ge=0, description="container restarts allowed during the window")


def restart_counts(pods: list[dict]) -> dict[str, int]:
    """``pod-uid/container`` -> restart count, for every container of every pod."""
    out: dict[str, int] = {}
    for p in pods:
        for cs in p.get("status", {}).get("containerStatuses", []) or []:
            out[f"{p['metadata']['uid']}/{cs['name']}"] = int(cs.get("restartCount", 0))
    return out


def not_terminating(pods: list[dict]) -> list[dict]:
    """Pods not being deleted: a terminating pod (say the crash-looping one a fixed rollout is
    replacing) is on its way out, and its last restarts say nothing about the workload now."""
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def pod_names(pods: list[dict]) -> dict[str, str]:
    return {p["metadata"]["uid"]: p["metadata"]["name"] for p in pods}


def bad_containers(pods: list[dict]) -> list[str]:
    """``pod/container: Reason`` for containers in a crash loop or failing to start.

    A kubelet may show a crash-looping container as ``waiting: CrashLoopBackOff`` or, during the
    back-off, as still ``terminated`` with restarts behind it: both count."""
    out = []
    for p in pods:
        for cs in p.get("status", {}).get("containerStatuses", []) or []:
            state = cs.get("state", {})
            reason = (state.get("waiting") or {}).get("reason")
            if reason in _BAD_WAITING:
                out.append(f"{p['metadata']['name']}/{cs['name']}: {reason}")
            elif "terminated" in state and cs.get("restartCount", 0) > 0 \
                    and p.get("spec", {}).get("restartPolicy", "Always") != "Never":
                code = state["terminated"].get("exitCode")
                out.append(f"{p['metadata']['name']}/{cs['name']}: CrashLoop (exit {code}, "
                           f"{cs['restartCount']} restarts)")
    return out


def rollout_incomplete(workload: dict) -> str:
    """Why a workload's current spec is not fully rolled out ('' when it is)."""
    spec, status = workload.get("spec", {}), workload.get("status", {})
    name = f"{workload['kind']}/{workload['metadata']['name']}"
    want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    if status.get("observedGeneration", 0) < workload["metadata"].get("generation", 0):
        return f"{name}: spec change not yet observed"
    updated = int(status.get("updatedReplicas") or 0)
    if updated < want:
        return f"{name}: {updated}/{want} replicas run the current spec"
    if workload["kind"] == "Deployment":
        # as kubectl rollout status: the old ReplicaSets' pods gone, and the updated ones available
        # (a new pod that never gets ready keeps its old one serving, updatedReplicas already full)
        total, available = int(status.get("replicas") or 0), int(status.get("availableReplicas") or 0)
        if total > updated:
            return f"{name}: {total - updated} old replica(s) still run"
        if available < updated:
            return f"{name}: {available}/{updated} updated replicas available"
    if workload["kind"] == "StatefulSet" and status.get("updateRevision") not in (None, status.get("currentRevision")):
        return f"{name}: update to revision {status.get('updateRevision')} not finished"
    for c in status.get("conditions") or []:
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            return f"{name}: rollout exceeded its progress deadline"
    return ""


def chart_probes(app: Any, namespace: str) -> dict[str, dict]:
    """``Kind/name -> container -> probes`` of the app's chart rendered offline with its default
    values: the reference when the run recorded no baseline probes (e.g. a third-party driver)."""
    if app is None or not getattr(app, "chart", None):
        return {}
    docs = yaml.safe_load_all(template(app.chart, namespace, {}))
    return {f"{d['kind']}/{d['metadata']['name']}": workload_probes(d) for d in docs
            if d and d.get("kind") in ("Deployment", "StatefulSet")}


def probe_problems(workload: dict, pods: list[dict], reference: dict[str, dict]) -> list[str]:
    """Probes of the workload's template and of each of its pods weaker than the reference's."""
    name = f"{workload['kind']}/{workload['metadata']['name']}"
    want = reference.get(name)
    if want is None:
        return []  # a workload the chart does not define: nothing to compare with
    out = weakened(want, workload_probes(workload), name)
    for p in pods:
        out += weakened(want, container_probes(p.get("spec", {})), f"pod/{p['metadata']['name']}")
    return out


def availability(workload: dict, expected: int) -> tuple[int, int]:
    status = workload.get("status", {})
    ready = status.get("availableReplicas") if workload["kind"] == "Deployment" else status.get("readyReplicas")
    return int(ready or 0), expected


@mitigation_oracle("workload_health")
class WorkloadHealth(MitigationOracle):
    """Expected replicas available, no crash loops, no restarts, throughout the window."""

    Params = WorkloadHealthParams

    def _workloads(self, ns: str) -> list[dict]:
        items = [dict(w, kind="Deployment") for w in list_json(self.ctx.kube, "deployments", ns)]
        items += [dict(w, kind="StatefulSet") for w in list_json(self.ctx.kube, "statefulsets", ns)]
        if self.params.workloads:
            items = [w for w in items if w["metadata"]["name"] in self.params.workloads]
        return items

    def _expected(self, w: dict) -> int:
        name = w["metadata"]["name"]
        baseline = (self.ctx.baseline.get("replicas") or {}).get(name, 0)
        return max(int(w.get("spec", {}).get("replicas", 1) or 0), self.params.min_replicas, int(baseline))

    def _reference_probes(self, ns: str) -> dict[str, dict]:
        recorded = self.ctx.baseline.get("probes")
        return recorded if isinstance(recorded, dict) and recorded else chart_probes(self.ctx.app, ns)

    def check(self) -> CheckResult:
        ns = self.params.namespace or self.ctx.namespace
        reference = self._reference_probes(ns)
        first: dict[str, int] = {}
        names: dict[str, str] = {}

        def probe() -> tuple[bool, dict[str, Any]]:
            workloads = self._workloads(ns)
            problems: list[str] = []
            missing = sorted(set(self.params.workloads) - {w["metadata"]["name"] for w in workloads})
            problems += [f"{m}: no such workload" for m in missing]
            if not workloads:
                problems.append(f"no Deployment or StatefulSet in namespace {ns}")
            pods: list[dict] = []
            for w in workloads:
                available, expected = availability(w, self._expected(w))
                if available < expected:
                    problems.append(f"{w['kind']}/{w['metadata']['name']}: {available}/{expected} available")
                labels = w.get("spec", {}).get("selector", {}).get("matchLabels") or {}
                own = not_terminating(pods_matching(self.ctx.kube, ns, labels)) if labels else []
                problems += probe_problems(w, own, reference)
                pods += own
            problems += bad_containers(pods)
            counts = restart_counts(pods)
            names.update(pod_names(pods))
            if not first:
                first.update(counts)
            restarted = {k: counts[k] - first[k] for k in counts if k in first and counts[k] > first[k]}
            if sum(restarted.values()) > self.params.max_restarts:
                problems += [f"{names.get(k.split('/')[0], k)}/{k.split('/')[1]}: restarted {n}x during the window"
                             for k, n in restarted.items()]
            for k in counts:  # pods that appear later start their own baseline
                first.setdefault(k, counts[k])
            return not problems, {"reason": "; ".join(problems)[:500]} if problems else {"workloads": len(workloads)}

        samples = sample_window(probe, window_of(self.params, self.ctx.window_seconds), self.params.interval_seconds,
                                min_pass_fraction=self.params.min_pass_fraction)
        # Old pods of a stuck rollout keep serving, so availability alone can pass while the
        # desired spec never runs: by the end of the window every rollout must be complete.
        stuck = [r for w in self._workloads(ns) if (r := rollout_incomplete(w))]
        if stuck:
            samples.append(Sample(samples[-1].t if samples else 0.0, False,
                                  {"reason": "rollout incomplete at the end of the window: " + "; ".join(stuck)}))
        return window_result(self.name, samples, self.params.min_pass_fraction,
                             evidence={"namespace": ns, "probes_compared_with": "baseline" if
                                       self.ctx.baseline.get("probes") else "chart" if reference else "nothing"})
