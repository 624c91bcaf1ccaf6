"""Metrics of runs: what each run record says, and aggregates with bootstrap intervals.

Conventions (also in docs/reporting.md):

- Only runs that completed count towards success rates and the other agent metrics; runs the
  framework could not finish (``status`` error or aborted) are counted by ``error_rate``.
- A diagnosis that was not judged (no judge configured, or the judge failed) is *not judged*:
  it is left out of the diagnosis and end-to-end rates, never counted as a failure.
- End-to-end success = diagnosis passed and mitigation passed.
- Premature resolution = the agent submitted that mitigation is done but the mitigation oracle
  failed; its rate is over runs whose mitigation was submitted and graded.
- Wrong remediation = the run changed something the ground truth does not call for
  (``grades.wrong_remediations`` not empty).
- Invalid-action rate and write share are pooled ratios (all invalid actions / all actions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sregym.core.record import Reward, RunRecord
from sregym.core.seeds import derive_seed
from sregym.report.bootstrap import DEFAULT_RESAMPLES, Estimate, ratio_estimate

NOT_SET = "-"


@dataclass(frozen=True)
class ToolUse:
    tool: str
    verb: str | None
    read_only: bool


@dataclass(frozen=True)
class RunFacts:
    """What one run record contributes to the metrics, flattened."""

    run_id: str
    problem: str
    agent: str
    agent_kind: str
    ranked: bool
    model: str | None
    suite: str
    seed: int
    noise: bool
    difficulty: str
    layer: str
    failure_mode: str
    completed: bool
    diagnosis: bool | None
    mitigation: bool | None
    mitigation_submitted: bool
    ttd_s: float | None
    ttm_s: float | None
    tokens: int
    steps: int
    invalid_actions: int
    actions: int
    evidence_coverage: float | None
    wrong_remediation: bool
    reward: float | None
    reward_terms: dict[str, float] = field(default_factory=dict)
    tools: tuple[ToolUse, ...] = ()
    version: str = ""
    started_at: str = ""

    @property
    def e2e(self) -> bool | None:
        if self.diagnosis is None or self.mitigation is None:
            return None
        return self.diagnosis and self.mitigation

    @property
    def premature(self) -> bool | None:
        if not self.mitigation_submitted or self.mitigation is None:
            return None
        return not self.mitigation

    @property
    def noise_label(self) -> str:
        return "noise" if self.noise else "quiet"

    def key(self, name: str) -> str:
        """The value of a grouping key (see ``GROUP_KEYS``)."""
        return GROUP_KEYS[name](self)


def reward_components(reward: Reward | None) -> dict[str, float]:
    """What each term added to (or, for penalties, took from) the reward total.

    The reward is a weighted mean of its measured terms minus penalties (sregym/oracles/_reward.py):
    a term's share is ``weight * value / sum of the weights used``; ``penalty_*`` terms count
    negative. Bookkeeping terms (``positive``, raw counts, ``budget_used``) are not components.
    A reward written without weights is taken as already split into components.
    """
    if reward is None:
        return {}
    if not reward.weights:
        return dict(reward.terms)
    positive = {k: v for k, v in reward.terms.items() if k in reward.weights and not k.startswith("penalty_")}
    used = sum(reward.weights[k] for k in positive)
    parts = {k: reward.weights[k] * v / used for k, v in positive.items()} if used > 0 else {}
    return parts | {k: -v for k, v in reward.terms.items() if k.startswith("penalty_") and v}


def agent_label(record: RunRecord) -> str:
    """How an agent is named in tables: its name, and its model when it has one."""
    a = record.agent
    return f"{a.name} ({a.model})" if a.model else a.name


def is_ranked(record: RunRecord) -> bool:
    """Oracle runs are an upper bound, never a leaderboard entry."""
    return record.agent.leaderboard and record.agent.kind != "oracle"


def run_facts(record: RunRecord) -> RunFacts:
    """Flatten one record into the facts the metrics need."""
    g = record.grades
    traj = record.trajectory
    tags = record.tags or {}
    layer = tags.get("layer")
    completed = record.status == "completed"
    return RunFacts(
        run_id=record.run_id,
        problem=record.problem_id,
        agent=agent_label(record),
        agent_kind=record.agent.kind,
        ranked=is_ranked(record),
        model=record.agent.model,
        suite=record.suite or NOT_SET,
        seed=record.seed,
        noise=record.noise,
        difficulty=record.difficulty,
        layer=str(getattr(layer, "value", layer) or NOT_SET),
        failure_mode=str(tags.get("failure_mode") or NOT_SET),
        completed=completed,
        diagnosis=record.diagnosis_passed if completed else None,
        mitigation=record.mitigation_passed if completed else None,
        mitigation_submitted=traj.submission("mitigation") is not None,
        ttd_s=record.ttd_s,
        ttm_s=record.ttm_s,
        tokens=traj.tokens,
        steps=traj.steps,
        invalid_actions=traj.invalid_actions,
        actions=len(traj.tool_calls) + len(traj.model_turns),
        evidence_coverage=g.evidence_coverage,
        wrong_remediation=bool(g.wrong_remediations),
        reward=g.reward.total if g.reward else None,
        reward_terms=reward_components(g.reward),
        tools=tuple(ToolUse(c.tool, c.verb, c.read_only) for c in traj.tool_calls),
        version=record.versions.sregym,
        started_at=record.started_at.isoformat(),
    )


GROUP_KEYS: dict[str, Callable[[RunFacts], str]] = {
    "agent": lambda f: f.agent,
    "problem": lambda f: f.problem,
    "difficulty": lambda f: f.difficulty,
    "layer": lambda f: f.layer,
    "failure_mode": lambda f: f.failure_mode,
    "noise": lambda f: f.noise_label,
    "suite": lambda f: f.suite,
}

# A metric maps a run to (numerator, denominator) or None when the run does not count for it.
Extract = Callable[[RunFacts], tuple[float, float] | None]


def _per_run(get: Callable[[RunFacts], bool | float | None]) -> Extract:
    """A rate (``get`` returns a bool) or a mean (a number) over completed runs where it is known."""

    def extract(f: RunFacts) -> tuple[float, float] | None:
        if not f.completed:
            return None
        v = get(f)
        return None if v is None else (float(v), 1.0)

    return extract


def _given(cond: Callable[[RunFacts], bool], get: Callable[[RunFacts], bool | None]) -> Callable[[RunFacts], bool | None]:
    return lambda f: get(f) if cond(f) else None


def _invalid(f: RunFacts) -> tuple[float, float] | None:
    return (f.invalid_actions, f.actions) if f.completed and f.actions else None


def _writes(f: RunFacts) -> tuple[float, float] | None:
    return (sum(not t.read_only for t in f.tools), len(f.tools)) if f.completed and f.tools else None


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    kind: str  # rate (0..1, shown as %) | mean | seconds
    extract: Extract


METRICS: tuple[Metric, ...] = (
    Metric("diagnosis", "diagnosis success", "rate", _per_run(lambda f: f.diagnosis)),
    Metric("mitigation", "mitigation success", "rate", _per_run(lambda f: f.mitigation)),
    Metric("e2e", "end-to-end success", "rate", _per_run(lambda f: f.e2e)),
    Metric("ttd_s", "time to diagnose", "seconds", _per_run(lambda f: f.ttd_s)),
    Metric("ttm_s", "time to mitigate", "seconds", _per_run(lambda f: f.ttm_s)),
    Metric("tokens", "tokens", "mean", _per_run(lambda f: f.tokens)),
    Metric("steps", "steps", "mean", _per_run(lambda f: f.steps)),
    Metric("invalid_action_rate", "invalid-action rate", "rate", _invalid),
    Metric("evidence_coverage", "evidence coverage", "rate", _per_run(lambda f: f.evidence_coverage)),
    Metric("wrong_remediation_rate", "wrong-remediation rate", "rate", _per_run(lambda f: f.wrong_remediation)),
    Metric("premature_resolution_rate", "premature-resolution rate", "rate", _per_run(lambda f: f.premature)),
    Metric("reward", "partial-credit reward", "mean", _per_run(lambda f: f.reward)),
    Metric("p_mit_given_diag_ok", "P(mitigation | diagnosis correct)", "rate",
           _per_run(_given(lambda f: f.diagnosis is True, lambda f: f.mitigation))),
    Metric("p_mit_given_diag_wrong", "P(mitigation | diagnosis wrong)", "rate",
           _per_run(_given(lambda f: f.diagnosis is False, lambda f: f.mitigation))),
    Metric("write_share", "write share of tool calls", "rate", _writes),
    Metric("error_rate", "framework error rate", "rate", lambda f: (float(not f.completed), 1.0)),
)
METRIC_BY_NAME = {m.name: m for m in METRICS}


@dataclass
class ToolMix:
    """Tool calls of a group: by tool, by kubectl verb, and read vs write."""

    by_tool: Counter[str] = field(default_factory=Counter)
    by_verb: Counter[str] = field(default_factory=Counter)
    reads: int = 0
    writes: int = 0

    def add(self, uses: Iterable[ToolUse]) -> None:
        for u in uses:
            self.by_tool[u.tool] += 1
            if u.verb:
                self.by_verb[u.verb] += 1
            if u.read_only:
                self.reads += 1
            else:
                self.writes += 1

    def as_dict(self) -> dict:
        return {"by_tool": dict(self.by_tool.most_common()), "by_verb": dict(self.by_verb.most_common()),
                "reads": self.reads, "writes": self.writes}


@dataclass
class GroupMetrics:
    """Every metric of one group of runs (e.g. one agent on hard problems)."""

    keys: dict[str, str]
    runs: int
    completed: int
    not_judged: int
    problems: int
    seeds: int
    metrics: dict[str, Estimate]
    tool_mix: ToolMix
    reward_terms: dict[str, float]

    def __getitem__(self, name: str) -> Estimate:
        return self.metrics[name]

    def as_dict(self) -> dict:
        return {"keys": self.keys, "runs": self.runs, "completed": self.completed, "not_judged": self.not_judged,
                "problems": self.problems, "seeds": self.seeds,
                "metrics": {k: v.as_dict() for k, v in self.metrics.items()},
                "tool_mix": self.tool_mix.as_dict(), "reward_terms": self.reward_terms}


def group_metrics(facts: Sequence[RunFacts], keys: dict[str, str], *, seed: int = 0,
                  resamples: int = DEFAULT_RESAMPLES) -> GroupMetrics:
    """All metrics of one group of runs, each with its hierarchical bootstrap interval."""
    # a stable run order: the interval must not depend on the order records were read in
    facts = sorted(facts, key=lambda f: (f.problem, f.seed, f.noise, f.run_id))
    estimates: dict[str, Estimate] = {}
    for metric in METRICS:
        problems, num, den = [], [], []
        for f in facts:
            got = metric.extract(f)
            if got is not None:
                problems.append(f.problem)
                num.append(got[0])
                den.append(got[1])
        # one seed per (group, metric): adding a group or metric never shifts another's interval
        metric_seed = derive_seed(seed, *sorted(keys.items()), metric.name)
        estimates[metric.name] = ratio_estimate(problems, num, den, seed=metric_seed, resamples=resamples)
    mix = ToolMix()
    terms: Counter[str] = Counter()
    rewarded = 0
    for f in facts:
        if f.completed:
            mix.add(f.tools)
            if f.reward_terms:
                rewarded += 1
                terms.update(f.reward_terms)
    return GroupMetrics(
        keys=keys,
        runs=len(facts),
        completed=sum(f.completed for f in facts),
        not_judged=sum(f.completed and f.diagnosis is None for f in facts),
        problems=len({f.problem for f in facts}),
        seeds=len({f.seed for f in facts}),
        metrics=estimates,
        tool_mix=mix,
        reward_terms={k: v / rewarded for k, v in sorted(terms.items())} if rewarded else {},
    )


def aggregate(facts: Sequence[RunFacts], by: Sequence[str], *, seed: int = 0,
              resamples: int = DEFAULT_RESAMPLES) -> list[GroupMetrics]:
    """One ``GroupMetrics`` per distinct value of the ``by`` keys, sorted by those values."""
    unknown = [k for k in by if k not in GROUP_KEYS]
    if unknown:
        raise ValueError(f"unknown grouping key(s) {unknown}; known: {sorted(GROUP_KEYS)}")
    groups: dict[tuple[str, ...], list[RunFacts]] = {}
    for f in facts:
        groups.setdefault(tuple(f.key(k) for k in by), []).append(f)
    return [group_metrics(members, dict(zip(by, values)), seed=seed, resamples=resamples)
            for values, members in sorted(groups.items())]


def facts_of(records: Iterable[RunRecord], *, ranked_only: bool = False) -> list[RunFacts]:
    """Facts of every record (only ranked agents' when ``ranked_only``, as leaderboards need)."""
    out = [run_facts(r) for r in records]
    return [f for f in out if f.ranked] if ranked_only else out
