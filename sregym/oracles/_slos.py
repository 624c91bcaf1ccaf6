"""Client-side SLOs: what they are and how a measurement compares with the pre-injection
baseline. The app descriptor (from the apps layer) owns the PromQL; this module reads SLO
definitions from any descriptor shape and judges values. Pure logic: querying is the caller's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sregym.core.errors import UserInputError
from sregym.core.promql import render_query


HIGHER_IS_BETTER = {"success_rate": True, "availability": True, "throughput": True,
                    "latency": False, "error_rate": False}


@dataclass(frozen=True)
class Slo:
    """One service-level objective: a PromQL expression that yields one number."""

    name: str
    query: str
    kind: Literal["success_rate", "availability", "throughput", "latency", "error_rate"]
    objective: float | None = None  # an absolute bound, used when no baseline exists

    @property
    def higher_is_better(self) -> bool:
        return HIGHER_IS_BETTER[self.kind]


def _field(item: Any, *names: str) -> Any:
    for n in names:
        value = item.get(n) if isinstance(item, dict) else getattr(item, n, None)
        if value is not None:
            return value
    return None


def infer_kind(name: str) -> str:
    low = name.lower()
    if any(w in low for w in ("latency", "p95", "p99", "p50", "duration")):
        return "latency"
    if "error" in low:
        return "error_rate"
    return "success_rate"


def slos_from(source: Any) -> list[Slo]:
    """SLOs from an app descriptor (an object or dict with ``slos``), or a list of SLO items.

    Each item needs ``name`` and ``query`` (or ``promql``); ``kind`` defaults from the name.
    """
    items = _field(source, "slos") if not isinstance(source, list) else source
    if isinstance(items, dict):
        items = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "query": v} for k, v in items.items()]
    out = []
    for item in items or []:
        name, query = _field(item, "name"), _field(item, "query", "promql", "expr")
        if not name or not query:
            continue
        kind = str(_field(item, "kind", "type") or infer_kind(str(name)))
        if kind not in HIGHER_IS_BETTER:
            kind = infer_kind(kind)
        objective = _field(item, "objective", "target", "threshold")
        out.append(Slo(str(name), str(query), kind, float(objective) if objective is not None else None))  # type: ignore[arg-type]
    return out


# What says that requests were answered at all: a latency SLO counts answered requests only, so a
# service made to fail fast or to hang past the client's timeout looks fast again.
ANSWERED_KINDS = ("success_rate", "availability", "error_rate")


def checked_slos(slos: list[Slo], only: list[str]) -> list[Slo]:
    """The SLOs to check: those named in ``only`` (all when empty), and with any latency SLO every
    SLO of the answered-requests kinds, in the descriptor's order. A latency SLO alone would pass a
    service that stopped answering; UserInputError when nothing could vouch for the answers."""
    chosen = [s for s in slos if not only or s.name in only]
    if not any(s.kind == "latency" for s in chosen):
        return chosen
    answered = [s for s in slos if s.kind in ANSWERED_KINDS]
    if not answered:
        raise UserInputError("a latency SLO needs a success-rate (or availability / error-rate) SLO beside it: "
                             "latency counts answered requests only; add one to the app's slos or params.slos")
    return [s for s in slos if s in chosen or s in answered]


def render(query: str, namespace: str, rate_window: str) -> str:
    """Fill the placeholders an app's PromQL may use (see ``sregym.core.promql``)."""
    return render_query(query, namespace, rate_window)


def baseline_value(baseline: dict[str, Any], name: str) -> float | None:
    """The pre-injection value of SLO ``name``: ``baseline['slos'][name]`` or ``baseline[name]``
    (a number, or a dict with ``value``/``mean``)."""
    raw = (baseline.get("slos") or {}).get(name, baseline.get(name))
    if isinstance(raw, dict):
        raw = raw.get("value", raw.get("mean"))
    try:
        return float(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def within(slo: Slo, value: float | None, baseline: float | None, *, rate_tolerance: float,
           latency_factor: float, latency_slack: float) -> tuple[bool, str]:
    """Whether a measured value is as good as the baseline, within tolerance (else the objective)."""
    if value is None:
        return False, "no data (is the workload sending traffic?)"
    if baseline is None:
        if slo.objective is None:
            return False, "no baseline and no objective to compare with"
        ok = value >= slo.objective if slo.higher_is_better else value <= slo.objective
        return ok, "" if ok else f"{value:.4g} misses the objective {slo.objective:g}"
    if slo.kind == "latency":
        limit = baseline * latency_factor + latency_slack
        return value <= limit, "" if value <= limit else f"{value:.4g}s > {limit:.4g}s (baseline {baseline:.4g}s)"
    if slo.higher_is_better:
        floor = baseline - rate_tolerance * (abs(baseline) if slo.kind == "throughput" else 1.0)
        return value >= floor, "" if value >= floor else f"{value:.4g} < {floor:.4g} (baseline {baseline:.4g})"
    ceiling = baseline + rate_tolerance
    return value <= ceiling, "" if value <= ceiling else f"{value:.4g} > {ceiling:.4g} (baseline {baseline:.4g})"
