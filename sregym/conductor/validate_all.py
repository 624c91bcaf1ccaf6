"""``sregym validate --all``: prove many problems, each with several seeds, one after another.

Each result is printed as it finishes and, with ``--log``, appended as one JSON line; ``--resume``
reads that log as a resumable index (the one the suite runner keeps, ``conductor.suite``) and
skips the (problem, seed) pairs already valid with the same noise setting.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sregym.cluster.handle import ClusterHandle
from sregym.conductor.episode import AppDriver
from sregym.conductor.validate import valid_in_log, validate_problem, validation_log
from sregym.core.errors import UserInputError
from sregym.core.loader import LoadedProblem
from sregym.report.docblock import checkout

Runs = list[tuple[LoadedProblem, int]]


def runs_to_validate(chosen: list[LoadedProblem], seeds: int, *, log: Path | None, resume: bool, noise: bool,
                     console: Console) -> Runs:
    """Every (problem, seed) pair, less those ``log`` records as valid when ``resume``."""
    if resume and log is None:
        raise UserInputError("--resume needs --log: the file of the interrupted run",
                             hint="sregym validate --all --log validate.jsonl --resume")
    runs = [(lp, seed) for lp in chosen for seed in range(seeds)]
    if not resume or log is None:
        return runs
    done = valid_in_log(log, noise)
    todo = [(lp, seed) for lp, seed in runs if (lp.id, seed) not in done]
    if len(todo) < len(runs):
        console.print(f"--resume: {len(runs) - len(todo)} problem(s) and seeds already valid in {log}, "
                      f"{len(todo)} to go")
    return todo


async def validate_all(runs: Runs, *, cluster: ClusterHandle, driver: AppDriver, grade_window: float,
                       verify_timeout: float, console: Console, log: Path | None, noise: bool) -> int:
    """Validate each run in turn; returns how many were invalid. Each result goes to ``log`` (with
    the checkout it was made on) as soon as it is known, so a killed run can resume."""
    index = validation_log(log) if log is not None else None
    version = checkout()
    table = Table("problem", "seed", "result", "seconds", "detail")
    failed = 0
    started = time.monotonic()
    for i, (lp, seed) in enumerate(runs, 1):
        t0 = time.monotonic()
        res = await validate_problem(lp.problem, cluster=cluster, driver=driver, grade_window=grade_window,
                                     verify_timeout=verify_timeout, console=Console(stderr=True), noise=noise,
                                     seed=seed)
        wall = time.monotonic() - t0
        bad = next((s for s in res.steps if not s.ok), None)
        failed += not res.ok
        if index is not None:
            index.append(res.record(wall) | {"checkout": version})
        verdict = "[green]valid[/]" if res.ok else "[red]INVALID[/]"
        console.print(f"[{i}/{len(runs)}] {lp.id} seed {seed}: {verdict} in {wall:.0f} s"
                      + (f" ({bad.name})" if bad else ""), highlight=False)
        table.add_row(lp.id, str(seed), verdict, f"{res.seconds:.1f}",
                      f"{bad.name}: {bad.detail}" if bad else " -> ".join(f"{s.name} {s.seconds:.0f}s" for s in res.steps))
    console.print(table)
    console.print(f"{len(runs) - failed} of {len(runs)} valid in {(time.monotonic() - started) / 60:.1f} min")
    return failed
