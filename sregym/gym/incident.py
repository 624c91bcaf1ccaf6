"""The conductor's side of an env episode: the problem, its ground truth and the run itself.

:func:`play_incident` loads the problem, plays it with ``sregym.conductor.run.run_problem`` (the
script ``sregym run`` uses: same Episode, same sealed tool server, same grading, same record) with
the env's :class:`~sregym.gym.channel.ChannelAgent` as the agent, and returns an :class:`Outcome`:
numbers about the run, never the problem, its ground truth or the oracles' evidence.

The boundary: the problem and its ground truth live only in this coroutine's frame (and in the
run it plays); the env holds the problem's id it was given, the channel and the outcome. The
record, which carries the grades' evidence, is written to disk as a run's is and not kept here.
In one Python process this is a convention the code keeps (a policy that imports sregym can read
the problem files itself); the fence for an adversarial agent is the run's sandbox, as in
``sregym run``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sregym.cluster.handle import ClusterHandle
from sregym.cluster.providers import current_cluster
from sregym.conductor.checks import check_problem
from sregym.conductor.run import run_problem
from sregym.conductor.suite import with_namespace
from sregym.core.loader import load_problem_arg
from sregym.core.problem import GroundTruth
from sregym.core.record import RunRecord
from sregym.core.settings import RunSettings
from sregym.core.trajectory import ToolCall, Trajectory
from sregym.gym.channel import ChannelAgent, ToolChannel
from sregym.oracles import evidence_coverage, wrong_remediations


@dataclass(frozen=True)
class Outcome:
    """What the env may tell the policy about a finished run: its reward and counts."""

    run_id: str
    reward: float
    terms: dict[str, float] = field(default_factory=dict)
    mitigation_passed: bool | None = None
    diagnosis_passed: bool | None = None
    status: str = "completed"
    stop_reason: str | None = None
    steps: int = 0
    invalid_actions: int = 0
    tokens: int = 0
    ttm_s: float | None = None
    record: str = ""

    @classmethod
    def of(cls, record: RunRecord, path: Path) -> Outcome:
        g, t = record.grades, record.trajectory
        diag = g.diagnosis.passed if g.diagnosis is not None and g.diagnosis.judged else None
        return cls(run_id=record.run_id, reward=g.reward.total if g.reward else 0.0,
                   terms=dict(g.reward.terms) if g.reward else {},
                   mitigation_passed=g.mitigation.passed if g.mitigation else None, diagnosis_passed=diag,
                   status=record.status, stop_reason=t.stop_reason, steps=t.steps, invalid_actions=t.invalid_actions,
                   tokens=t.tokens, ttm_s=record.ttm_s, record=str(path))


def call_judge(channel: ToolChannel, ground_truth: GroundTruth) -> Callable[[ToolCall], None]:
    """The conductor-side verdict on each tool call as the server records it, handed to the channel as
    numbers only: whether it was invalid, how many wrong remediations it made, and how much it raised
    the run's evidence coverage (the record's metric over the calls so far, so the gains of an
    episode sum to the record's ``evidence_coverage`` less its value before any call)."""
    calls: list[ToolCall] = []
    covered = evidence_coverage(Trajectory(), ground_truth)  # 1.0 when the problem lists no evidence

    def judge(call: ToolCall) -> None:
        nonlocal covered
        calls.append(call)
        now = evidence_coverage(Trajectory(tool_calls=calls), ground_truth)
        channel.verdict(invalid=call.invalid, wrong=len(wrong_remediations(Trajectory(tool_calls=[call]), ground_truth)),
                        evidence=now - covered)
        covered = now

    return judge


async def play_incident(problem: str, settings: RunSettings, channel: ToolChannel, *, out_dir: Path,
                        problems_dirs: Sequence[Path] = (), kubeconfig: Path | None = None,
                        context: str | None = None, cluster: ClusterHandle | None = None,
                        namespace: str | None = None) -> Outcome:
    """Run ``problem`` (an id or a YAML path) once as ``settings`` say, the channel's agent playing;
    ``namespace``: the app's namespace for this run (a slot), as a suite's parallel cells do."""
    loaded = load_problem_arg(problem, list(problems_dirs))
    check_problem(loaded, noise=settings.noise)
    played = with_namespace(loaded.problem, namespace) if namespace else loaded.problem
    record = await run_problem(played, settings, out_dir=out_dir, cluster=cluster or current_cluster(kubeconfig, context),
                               runner=ChannelAgent(channel), on_tool_call=call_judge(channel, loaded.problem.ground_truth))
    return Outcome.of(record, out_dir / f"{record.run_id}.json")
