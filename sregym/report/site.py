"""``sregym leaderboard build``: a static HTML leaderboard from run records alone.

One index page (a sortable table of agents with each entry's software version, suite, seeds and
dates, the figures, and a table of problems), one page per agent and one per problem. Oracle runs
(and any agent whose record says ``leaderboard: false``) are left out entirely. The site is plain
files: serve the folder with any web server, or open ``index.html``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from sregym.core.errors import UserInputError
from sregym.report import plots
from sregym.report.bootstrap import DEFAULT_RESAMPLES
from sregym.report.build import BREAKDOWNS, analyse
from sregym.report.metrics import METRIC_BY_NAME, METRICS, GroupMetrics, RunFacts, aggregate, facts_of
from sregym.report.records import load_records
from sregym.report.tables import BREAKDOWN, SHORT, fmt

STATIC = Path(__file__).with_name("static")


def slug(name: str) -> str:
    """A file name for an agent or problem; a short hash keeps two similar names apart."""
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60] or "x"
    return clean if clean == name else f"{clean}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


@dataclass
class Entry:
    """One leaderboard row: an agent (name and model) and where its numbers came from."""

    name: str
    slug: str
    kind: str
    model: str | None
    group: GroupMetrics
    suites: list[str]
    seeds: list[int]
    versions: list[str]
    first_date: str
    last_date: str


def _entries(agents: Sequence[GroupMetrics], facts: Sequence[RunFacts]) -> list[Entry]:
    out = []
    for g in agents:
        mine = [f for f in facts if f.agent == g.keys["agent"]]
        dates = sorted(f.started_at[:10] for f in mine)
        out.append(Entry(
            name=g.keys["agent"], slug=slug(g.keys["agent"]), kind=mine[0].agent_kind, model=mine[0].model,
            group=g, suites=sorted({f.suite for f in mine}), seeds=sorted({f.seed for f in mine}),
            versions=sorted({f.version for f in mine}), first_date=dates[0], last_date=dates[-1]))
    # ranked by end-to-end success, then mitigation, then fewer tokens (unknown sinks)
    def rank(e: Entry) -> tuple:
        return (-(e.group["e2e"].value or -1), -(e.group["mitigation"].value or -1), e.group["tokens"].value or 0)

    return sorted(out, key=rank)


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("sregym.report", "templates"), autoescape=select_autoescape(["j2", "html"]),
                      trim_blocks=True, lstrip_blocks=True)
    env.globals.update(fmt=fmt, label=lambda m: METRIC_BY_NAME[m].label, short=lambda m: SHORT.get(m, m))
    return env


def _sregym_version() -> str:
    try:
        return version("sregym")
    except PackageNotFoundError:
        return "unknown"


def build_leaderboard(inputs: Sequence[Path | str], out: Path | str, *, seed: int = 0,
                      resamples: int = DEFAULT_RESAMPLES) -> Path:
    """Write the site into ``out`` and return the path of its ``index.html``."""
    records = load_records(inputs)
    facts = facts_of(records, ranked_only=True)
    if not facts:
        what = "run records" if not records else "ranked runs (only oracle or unranked agents were found)"
        raise UserInputError(f"no {what} under {', '.join(map(str, inputs))}",
                             hint="pass the --out directories of `sregym suite run`")
    ranked = [r for r, f in zip(records, facts_of(records)) if f.ranked]
    a = analyse(ranked, seed=seed, resamples=resamples)
    site = Path(out)
    site.mkdir(parents=True, exist_ok=True)
    for sub in ("agent", "problem"):
        (site / sub).mkdir(exist_ok=True)
    shutil.copytree(STATIC, site / "static", dirs_exist_ok=True)
    plots.all_figures(a.agents, a.problem_cells, site / "figures")

    env = _environment()
    entries = _entries(a.agents, facts)
    by_problem = {g.keys["problem"]: g for g in aggregate(facts, ["problem"], seed=seed, resamples=resamples)}
    common = {
        "built": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC", "total_runs": len(facts),
        "sregym_version": _sregym_version(), "fmt": fmt, "breakdown_columns": list(BREAKDOWN),
        "problem_link": lambda p: f"{common['root']}problem/{slug(p)}.html",
        "agent_link": lambda n: f"{common['root']}agent/{slug(n)}.html",
    }

    def render(template: str, path: Path, root: str, **kw) -> None:
        common["root"] = root
        path.write_text(env.get_template(template).render(**common, **kw))

    render("index.html.j2", site / "index.html", "", entries=entries, figures=plots.FIGURES,
           problems=sorted(by_problem), problem_rows=list(by_problem.values()), ranked_runs=len(facts))
    for e in entries:
        render("agent.html.j2", site / "agent" / f"{e.slug}.html", "../", e=e,
               all_metrics=[m.name for m in METRICS],
               per_problem=[g for g in a.problem_cells if g.keys["agent"] == e.name],
               breakdowns={k: [g for g in a.breakdowns[k] if g.keys["agent"] == e.name] for k in BREAKDOWNS},
               runs=[f for f in facts if f.agent == e.name])
    for problem in sorted(by_problem):
        mine = [f for f in facts if f.problem == problem]
        render("problem.html.j2", site / "problem" / f"{slug(problem)}.html", "../", problem=problem,
               info=mine[0], per_agent=[g for g in a.problem_cells if g.keys["problem"] == problem], runs=mine)
    return site / "index.html"

