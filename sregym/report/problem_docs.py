"""``docs/problems.md``: one page describing every curated problem, generated from the files.

It shows what a researcher choosing problems needs (id, app, layer, failure mode, difficulty,
split, suites) and what the on-call SRE is told (the alert). It never shows ground truth, fault
parameters or oracles, so publishing it gives away no more than the alert an agent receives.
Regenerate with ``sregym generate --docs docs/problems.md`` (a unit test keeps it in sync).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sregym.core.loader import Catalog

HEADER = """# Problems

Generated from `problems/*.yaml` by `sregym generate --docs docs/problems.md`; do not edit by hand.
Each row says what the on-call SRE is told (the alert), never what is wrong.
`sregym show ID` prints the same without ground truth; `sregym validate ID` proves a problem on a
cluster.
"""


def _cell(text: str) -> str:
    """Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def render(catalog: Catalog) -> str:
    """The whole page for ``catalog`` (deterministic: sorted by id, suites by name)."""
    problems = [lp.problem for _, lp in sorted(catalog.problems.items())]
    suites_of: dict[str, list[str]] = {}
    for name in sorted(catalog.suites):
        for lp in catalog.suite_problems(name):
            suites_of.setdefault(lp.id, []).append(name)
    lines = [HEADER]
    count = Counter(p.app.name for p in problems)
    lines.append(f"{len(problems)} problems: " + ", ".join(f"{n} on {a}" for a, n in sorted(count.items())) + ".\n")
    layers = Counter(p.tags.layer.value for p in problems)
    lines.append("By layer: " + ", ".join(f"{k} {v}" for k, v in sorted(layers.items())) + ".\n")
    extras = Counter(t for p in problems for t in p.tags.extra)
    if extras:
        lines.append("By tag: " + ", ".join(f"{k} {v}" for k, v in sorted(extras.items())) + ".\n")
    if catalog.suites:
        lines.append("## Suites\n")
        lines.append("| suite | problems | seeds | description |")
        lines.append("|---|---|---|---|")
        for name in sorted(catalog.suites):
            s = catalog.suites[name].suite
            lines.append(f"| `{name}` | {len(catalog.suite_problems(name))} | {s.seeds} | {_cell(s.description)} |")
        lines.append("")
    lines.append("## Problems\n")
    lines.append("| id | app | layer | failure mode | tags | difficulty | split | suites | what the user sees |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for p in problems:
        tags = ", ".join(p.tags.extra) or "-"
        suites = ", ".join(suites_of.get(p.id, [])) or "-"
        lines.append(f"| `{p.id}` | {p.app.name} | {p.tags.layer.value} | {_cell(p.tags.failure_mode)} | "
                     f"{_cell(tags)} | {p.difficulty.value} | {p.split.value} | {suites} | {_cell(p.alert)} |")
    return "\n".join(lines) + "\n"


def write(catalog: Catalog, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(catalog), encoding="utf-8")
    return path
