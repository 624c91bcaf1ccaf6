"""``slo``: the workload's client-side SLOs (success rate, p95 latency, ...) are back to the
pre-injection baseline, within tolerances, at every sample of the window.

The PromQL comes from the app descriptor (``ctx.app``, handed over by the conductor) unless the problem
gives ``slos`` itself; the baseline is what the conductor measured before injecting
(``ctx.baseline``). No data counts as a failure: a workload that stopped sending traffic does not
meet its SLO. A latency SLO is always checked with the success rate: it counts answered requests
only, so a service made to fail fast, or to hang past the client's timeout, would look fast.

The SLOs are only as honest as whoever answers the load generator: every sample also fails when
a Service's path or the app's wiring changed since the baseline (``ctx.baseline["paths"]``: each
Service's selector, the workloads behind it and what they run, its ports, and the addresses the
app's workloads are given; a baseline recorded before those compares the entry's path,
``ctx.baseline["entry"]``), as when a stub that says 200 to everything is put behind the entry, or
a copy of the faulty component behind its Service (measured: each passed an SLO-graded problem
whose fault was still there). An SLO on the app's own series (not the load generator's) is only as
honest as whoever exports them: every sample also fails when a pod exporting them is not one the
baseline's workloads run as they ran then (``sregym.cluster.metric_sources``: a pod the agent runs
in the app's namespace exporting the same series passed pipeline_db_slow_disk with its disk slow).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import Field

from sregym.oracles import (MIN_RATE_WINDOW_SECONDS, CheckResult, ClusterError, MitigationOracle, Slo, WindowParams,
                            app_path_changes, baseline_value, checked_slos, exporting_pods, fed_from_app_namespace,
                            list_app_objects, max_samples, mitigation_oracle, parse_duration, path_changes,
                            query_value, read_app_paths, read_entry_path, read_source_changes, render, sample_window,
                            scrape_interval_seconds, slos_from, window_of, window_result, within)


# the default rate window: the shortest a success rate at the load generator's rate means something over
MIN_RATE_WINDOW = f"{MIN_RATE_WINDOW_SECONDS}s"


class SloParams(WindowParams):
    interval_seconds: float | None = Field(None, gt=0, description="time between samples; default: every scrape "
                                           "(each sample sees new data, none is wasted)")
    only: list[str] = Field(default_factory=list, description="check only these SLO names (a latency SLO brings "
                            "the success rate with it: latency counts answered requests only)")
    slos: list[dict[str, Any]] = Field(default_factory=list,
                                       description="SLOs given inline ({name, query, kind, objective}); default: the app's")
    success_rate_tolerance: float = Field(0.02, ge=0, le=1, description="allowed absolute drop below the baseline")
    latency_factor: float = Field(1.5, ge=1, description="allowed latency as a multiple of the baseline")
    latency_slack_seconds: float = Field(0.05, ge=0, description="added to the latency limit (noise floor)")
    rate_window: str = Field(MIN_RATE_WINDOW, pattern=r"^\d+[smh]$", description="replaces $window in the queries")
    namespace: str | None = None


def sample_interval(params: SloParams) -> float:
    """Seconds between samples: as given, else one scrape interval (a sample between two scrapes
    would repeat the one before it)."""
    return params.interval_seconds or scrape_interval_seconds()


def lag_of(params: SloParams) -> float:
    """A rate over ``rate_window`` covers only the new state one window (and a scrape) later."""
    return parse_duration(params.rate_window) + scrape_interval_seconds()


def disturbed_samples(params: SloParams, seconds: float) -> int:
    """The most samples a disturbance lasting ``seconds`` can reach: each rate window that overlaps
    it, i.e. from its start until one lag after its end. A fault's wake after its fix is such a
    disturbance of 0 s (plus however long the app takes to settle)."""
    return math.floor((seconds + lag_of(params)) / sample_interval(params)) + 1


def tolerated_samples(params: SloParams, window_s: float) -> int:
    """How many samples may fail in a full window that still passes (``min_pass_fraction``); as
    many samples must pass before a broken system can pass."""
    n = max_samples(window_s, sample_interval(params))
    return n - math.ceil(params.min_pass_fraction * n - 1e-9)


def measure(slos: list[Slo], prometheus_url: str, namespace: str,
            rate_window: str = MIN_RATE_WINDOW) -> dict[str, float | None]:
    """One reading of every SLO (``None``: no data)."""
    return {s.name: query_value(prometheus_url, render(s.query, namespace, rate_window)) for s in slos}


@mitigation_oracle("slo")
class SloOracle(MitigationOracle):
    """Every SLO within tolerance of its baseline at every sample."""

    Params = SloParams

    @classmethod
    def lag_seconds(cls, params: SloParams) -> float:
        """A rate over ``rate_window`` covers only the new state one window (and a scrape) later."""
        return lag_of(params)

    def check(self) -> CheckResult:
        p = self.params
        ns = p.namespace or self.ctx.namespace
        slos = checked_slos(slos_from(p.slos) if p.slos else slos_from(self.ctx.app), p.only)
        if not slos:
            return CheckResult(name=self.name, passed=False, message="no SLOs to check: the app descriptor defines "
                               "none (or params.only matched none); give params.slos")
        if not self.ctx.prometheus_url:
            raise ClusterError("the slo oracle needs Prometheus, but the run has no prometheus_url")
        baselines = {s.name: baseline_value(self.ctx.baseline, s.name) for s in slos}
        # who answered the app's requests at the baseline (the app's own namespace only): every
        # Service's path and the wiring, or (a baseline recorded before those) the entry's path
        own = ns == self.ctx.namespace
        paths = self.ctx.baseline.get("paths") if own else None
        entry = self.ctx.baseline.get("entry") if own else None
        # the series of the app's own namespace an SLO reads (not the load generator's): any pod there
        # may export them, so they count only while the app's own pods alone do (``metric_sources``)
        fed = list(dict.fromkeys(text for s in slos for text, _, _ in
                                 fed_from_app_namespace(render(s.query, ns, p.rate_window))))

        def probe() -> tuple[bool, dict[str, Any]]:
            values = measure(slos, self.ctx.prometheus_url, ns, p.rate_window)
            reasons = []
            # one listing of the namespace for both checks of this sample (4-7 API reads each)
            objects = list_app_objects(self.ctx.kube, ns) if paths else None
            if paths:
                changes = app_path_changes(paths, read_app_paths(self.ctx.kube, ns, known=paths.get("services") or (),
                                                                 objects=objects))
                if changes:
                    reasons.append("the app's requests are no longer answered by the app's own services: "
                                   + "; ".join(changes[:3]))
            elif entry:
                changes = path_changes(entry, read_entry_path(self.ctx.kube, ns, entry["service"]))
                if changes:
                    reasons.append("the load generator is no longer answered by the app's own entry: "
                                   + "; ".join(changes[:3]))
            if fed and paths:
                changes = read_source_changes(self.ctx.kube, ns, exporting_pods(self.ctx.prometheus_url, fed, ns), paths,
                                              objects=objects)
                if changes:
                    reasons.append("the series the SLOs read from the app's namespace are not only the app's own: "
                                   + "; ".join(changes[:3]))
            for s in slos:
                ok, why = within(s, values[s.name], baselines[s.name], rate_tolerance=p.success_rate_tolerance,
                                 latency_factor=p.latency_factor, latency_slack=p.latency_slack_seconds)
                if not ok:
                    reasons.append(f"{s.name}: {why}")
            return not reasons, {"values": values} | ({"reason": "; ".join(reasons)} if reasons else {})

        samples = sample_window(probe, window_of(p, self.ctx.window_seconds), sample_interval(p),
                                min_pass_fraction=p.min_pass_fraction)
        return window_result(self.name, samples, p.min_pass_fraction,
                             evidence={"baseline": baselines, "queries": {s.name: s.query for s in slos},
                                       "entry_path": "every Service's path and the wiring compared with the baseline's"
                                       if paths else "compared with the baseline's" if entry else "not recorded"}
                             | ({"metric_sources": "the pods exporting " + ", ".join(fed) + (
                                 " compared with the baseline's workloads" if paths else ": not compared (no paths "
                                 "recorded at the baseline)")} if fed else {}))
