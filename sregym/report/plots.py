"""The report's figures (matplotlib, saved as PNG and SVG).

Each function takes aggregated metrics and writes one figure; error bars are the bootstrap 95%
intervals. A figure with nothing to show says so in its body rather than being left out, so the
report and the leaderboard always have the same set of files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: never open a window, never need a display

import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
from matplotlib.ticker import PercentFormatter  # noqa: E402

from sregym.report.bootstrap import Estimate  # noqa: E402
from sregym.report.metrics import METRIC_BY_NAME, GroupMetrics  # noqa: E402

FIGURES = ("success_by_agent", "success_vs_evidence", "problem_heatmap", "score_components",
           "errors_and_invalid_actions", "tokens_vs_success")
STYLE = {"figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
         "grid.alpha": 0.3, "font.size": 10, "svg.hashsalt": "sregym"}


def _save(fig: plt.Figure, out: Path, name: str) -> str:
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    for ext in ("png", "svg"):
        # no date (and the fixed SVG hash salt in STYLE) keep rebuilt files byte-identical
        fig.savefig(out / f"{name}.{ext}", metadata={"Date": None} if ext == "svg" else None)
    plt.close(fig)
    return name


def _empty(ax: plt.Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what} in these records", ha="center", va="center", transform=ax.transAxes,
            color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def shown_success(groups: Sequence[GroupMetrics], metric: str = "e2e") -> str:
    """``e2e``, or ``mitigation`` when no run had a judged diagnosis (e2e is unknown everywhere)."""
    return "mitigation" if metric == "e2e" and not any(g[metric].known for g in groups) else metric


def _value(e: Estimate) -> float:
    return np.nan if e.value is None else e.value


def _err(ests: Sequence[Estimate]) -> np.ndarray:
    """Asymmetric error bars (2 x n) from intervals; zero where there is no interval."""
    lo = [0 if e.value is None or e.lo is None else e.value - e.lo for e in ests]
    hi = [0 if e.value is None or e.hi is None else e.hi - e.value for e in ests]
    return np.array([lo, hi])


def _agents(groups: Sequence[GroupMetrics]) -> list[str]:
    return [g.keys["agent"] for g in groups]


def _bars(ax: plt.Axes, groups: Sequence[GroupMetrics], metrics: Sequence[str], *, percent: bool) -> None:
    """Grouped bars: one cluster per agent, one bar per metric, with interval error bars."""
    x = np.arange(len(groups))
    width = 0.8 / len(metrics)
    for i, m in enumerate(metrics):
        ests = [g[m] for g in groups]
        ax.bar(x + (i - (len(metrics) - 1) / 2) * width, [_value(e) for e in ests], width, yerr=_err(ests),
               capsize=3, label=METRIC_BY_NAME[m].label, error_kw={"elinewidth": 1})
    ax.set_xticks(x, _agents(groups), rotation=20 if len(groups) > 4 else 0, ha="right" if len(groups) > 4 else "center")
    if percent:
        ax.set_ylim(0, 1.05)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)


def success_by_agent(agents: Sequence[GroupMetrics], out: Path) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(8.5, 4))
        if agents:
            _bars(ax, agents, ("diagnosis", "mitigation", "e2e"), percent=True)
            ax.set_ylabel("success rate (95% CI)")
        else:
            _empty(ax, "runs")
        ax.set_title("Success per agent")
        return _save(fig, out, "success_by_agent")


def _scatter(ax: plt.Axes, agents: Sequence[GroupMetrics], xm: str, ym: str) -> None:
    """One point per agent at (x metric, y metric) with both intervals as error bars."""
    for g in agents:
        xe, ye = g[xm], g[ym]
        if xe.value is None or ye.value is None:
            continue
        ax.errorbar([xe.value], [ye.value], xerr=_err([xe]), yerr=_err([ye]), fmt="o", capsize=3, label=g.keys["agent"])
    ax.set_xlabel(METRIC_BY_NAME[xm].label)
    ax.set_ylabel(METRIC_BY_NAME[ym].label)
    ax.set_ylim(-0.05, 1.05)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    else:
        _empty(ax, f"runs with both {METRIC_BY_NAME[xm].label} and {METRIC_BY_NAME[ym].label}")


def success_vs_evidence(agents: Sequence[GroupMetrics], out: Path) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 4))
        _scatter(ax, agents, "evidence_coverage", "e2e")
        if ax.get_legend():
            ax.set_xlim(-0.05, 1.05)
            ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_title("End-to-end success vs evidence coverage")
        return _save(fig, out, "success_vs_evidence")


def tokens_vs_success(agents: Sequence[GroupMetrics], out: Path) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.5, 4))
        _scatter(ax, agents, "tokens", "e2e")
        if ax.get_legend() and all((g["tokens"].value or 0) > 0 for g in agents if g["tokens"].value is not None):
            ax.set_xscale("log")
        ax.set_title("Tokens vs end-to-end success")
        return _save(fig, out, "tokens_vs_success")


def problem_heatmap(cells: Sequence[GroupMetrics], out: Path, metric: str = "e2e") -> str:
    """Problems down, agents across, the success rate in each cell (grey: no graded run). When no
    diagnosis was judged at all, end-to-end success is unknown everywhere: mitigation is shown."""
    metric = shown_success(cells, metric)
    problems = sorted({g.keys["problem"] for g in cells})
    agents = sorted({g.keys["agent"] for g in cells})
    grid = np.full((len(problems), len(agents)), np.nan)
    for g in cells:
        grid[problems.index(g.keys["problem"]), agents.index(g.keys["agent"])] = _value(g[metric])
    with plt.rc_context({**STYLE, "axes.grid": False}):
        fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(agents) + 3), max(2.5, 0.38 * len(problems) + 1.5)))
        if cells:
            cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="0.85")
            im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
            for (i, j), v in np.ndenumerate(grid):
                ax.text(j, i, "n/a" if np.isnan(v) else f"{100 * v:.0f}%", ha="center", va="center", fontsize=8)
            ax.set_xticks(range(len(agents)), agents, rotation=20 if len(agents) > 3 else 0,
                          ha="right" if len(agents) > 3 else "center")
            ax.set_yticks(range(len(problems)), problems)
            fig.colorbar(im, ax=ax, format=PercentFormatter(1.0), fraction=0.04)
        else:
            _empty(ax, "runs")
        ax.set_title(f"{METRIC_BY_NAME[metric].label} per problem")
        return _save(fig, out, "problem_heatmap")


def score_components(agents: Sequence[GroupMetrics], out: Path) -> str:
    """Mean contribution of each reward term per agent: terms stack up, penalties stack down,
    and a dot marks the mean reward."""
    terms = sorted({t for g in agents for t in g.reward_terms})
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(8.5, 4))
        if terms:
            x = np.arange(len(agents))
            up, down = np.zeros(len(agents)), np.zeros(len(agents))
            for t in terms:
                vals = np.array([g.reward_terms.get(t, 0.0) for g in agents])
                base = np.where(vals >= 0, up, down)
                ax.bar(x, vals, 0.6, bottom=base, label=t.replace("_", " "))
                up += np.clip(vals, 0, None)
                down += np.clip(vals, None, 0)
            ax.plot(x, [_value(g["reward"]) for g in agents], "o", color="black", label="mean reward")
            ax.axhline(0, color="0.3", linewidth=0.8)
            ax.margins(y=0.08)
            ax.set_xticks(x, _agents(agents))
            ax.set_ylabel("mean contribution to reward")
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        else:
            _empty(ax, "reward terms")
        ax.set_title("Score components (partial-credit reward)")
        return _save(fig, out, "score_components")


def errors_and_invalid_actions(agents: Sequence[GroupMetrics], out: Path) -> str:
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(8.5, 4))
        if agents:
            _bars(ax, agents, ("error_rate", "invalid_action_rate", "wrong_remediation_rate",
                               "premature_resolution_rate"), percent=True)
            ax.set_ylabel("rate (95% CI)")
        else:
            _empty(ax, "runs")
        ax.set_title("Errors, invalid actions and wrong or premature fixes")
        return _save(fig, out, "errors_and_invalid_actions")


def all_figures(agents: Sequence[GroupMetrics], problem_cells: Sequence[GroupMetrics], out: Path) -> list[str]:
    """Write every figure into ``out``; returns their base names (``<name>.png``/``.svg``)."""
    return [
        success_by_agent(agents, out),
        success_vs_evidence(agents, out),
        problem_heatmap(problem_cells, out),
        score_components(agents, out),
        errors_and_invalid_actions(agents, out),
        tokens_vs_success(agents, out),
    ]
