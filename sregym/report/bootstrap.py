"""Hierarchical bootstrap confidence intervals over problems, then seeds.

Runs of one problem are not independent draws: a problem that is easy for an agent is easy on
every seed. So an interval that resamples runs as if they were independent is too narrow. We
resample in two stages, as the suite was built:

1. draw as many problems as there are, with replacement;
2. inside each drawn problem, draw as many of its runs (seeds x noise settings) as it has, with
   replacement.

Every statistic here is a ratio of sums, ``sum(num) / sum(den)`` over the drawn runs: a rate has
``num`` in {0, 1} and ``den = 1``; a mean (tokens, TTD) has ``den = 1``; a pooled ratio such as the
invalid-action rate has per-run counts in both. The interval is the percentile interval of the
statistic over ``resamples`` draws, seeded so the same inputs always give the same interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap interval; ``n`` runs and ``problems`` problems fed it."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    problems: int = 0

    @property
    def known(self) -> bool:
        return self.value is not None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi, "n": self.n, "problems": self.problems}


EMPTY = Estimate(None)


def ratio_estimate(
    problems: Sequence[str],
    num: Sequence[float],
    den: Sequence[float] | None = None,
    *,
    seed: int,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
) -> Estimate:
    """``sum(num) / sum(den)`` over runs, with a hierarchical bootstrap interval.

    ``problems[i]`` names the problem of run ``i`` (the resampling cluster). ``den`` defaults to
    one per run, which makes the statistic a plain mean.
    """
    num_a = np.asarray(num, dtype=float)
    den_a = np.ones_like(num_a) if den is None else np.asarray(den, dtype=float)
    if not (len(problems) == len(num_a) == len(den_a)):
        raise ValueError("problems, num and den must have one entry per run")
    if len(num_a) == 0 or den_a.sum() <= 0:
        return Estimate(None, n=len(num_a), problems=len(set(problems)))
    point = float(num_a.sum() / den_a.sum())

    # Pad each problem's runs into one row of a (problems x most runs) matrix so the whole
    # bootstrap is a few array operations instead of a Python loop per draw.
    names = sorted(set(problems))
    index = {p: i for i, p in enumerate(names)}
    rows: list[list[int]] = [[] for _ in names]
    for run, p in enumerate(problems):
        rows[index[p]].append(run)
    counts = np.array([len(r) for r in rows])
    width = int(counts.max())
    num_m = np.zeros((len(names), width))
    den_m = np.zeros((len(names), width))
    for i, r in enumerate(rows):
        num_m[i, : len(r)] = num_a[r]
        den_m[i, : len(r)] = den_a[r]

    rng = np.random.default_rng(seed)
    drawn = rng.integers(len(names), size=(resamples, len(names)))  # stage 1: problems
    n_drawn = counts[drawn]  # (B, P): runs available in each drawn problem
    slots = np.arange(width)
    # stage 2: inside each drawn problem, n_p draws among its n_p runs; padding slots are masked
    pick = np.floor(rng.random((resamples, len(names), width)) * n_drawn[..., None]).astype(int)
    live = slots[None, None, :] < n_drawn[..., None]
    num_s = np.where(live, num_m[drawn[..., None], pick], 0.0).sum(axis=(1, 2))
    den_s = np.where(live, den_m[drawn[..., None], pick], 0.0).sum(axis=(1, 2))
    ok = den_s > 0
    stats = num_s[ok] / den_s[ok]
    if stats.size == 0:
        return Estimate(point, n=len(num_a), problems=len(names))
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [tail, 1.0 - tail])
    # Clamp so floating error never puts the point outside its own interval.
    return Estimate(point, float(min(lo, point)), float(max(hi, point)), n=len(num_a), problems=len(names))
