"""Run records as chat-format tool-calling conversations, for supervised fine-tuning or offline RL.

One row per episode: OpenAI chat ``messages`` (system, the task prompt as the user turn, then for
each model reply an assistant turn with the ``tool_calls`` it asked for together, each answered by
a ``tool`` turn with the matching ``tool_call_id``), the run's ids and its reward. Written as JSON lines, or as a Hugging Face
``datasets``-loadable folder (``data/<split>-*.jsonl`` plus a README.md dataset card that declares
the features, one schema for every split).

What a record does not hold is not invented: a tool turn carries the text the tool answered as the
record keeps it (up to 16000 characters); records made before result text was kept give the error,
or a note of the result's size. The grader's
evidence (judge answers, oracle checks, evidence coverage, wrong remediations) is never exported;
only the reward figures are. Ground truth is opt-in (``with_ground_truth``), as a separate field
and never inside the messages, for diagnosis SFT labels.

This module never loads a problem (the agent plane's contract): the caller (``sregym export``)
passes what it needs of each problem as :class:`ProblemFacts`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sregym.agentplane.agents.react import SYSTEM_PROMPT
from sregym.agentplane.budgets import AgentBudgets
from sregym.agentplane.dataset_features import card_features
from sregym.agentplane.prompt import render_prompt
from sregym.core.record import RunRecord

CHAT_FORMAT = "sregym-chat"
CHAT_VERSION = 1
UNKNOWN_SPLIT = "unknown"


@dataclass(frozen=True)
class ProblemFacts:
    """What the export needs from a problem file: the alert (for the task prompt), the split, and
    the ground truth (exported only when asked)."""

    alert: str
    split: str = "test"
    budgets: dict[str, Any] = field(default_factory=dict)
    ground_truth: dict[str, Any] | None = None


ProblemLookup = Callable[[str], "ProblemFacts | None"]


@dataclass
class ExportResult:
    rows: list[dict[str, Any]]
    skipped_incomplete: int = 0
    skipped_no_trajectory: int = 0
    skipped_oracle: int = 0
    skipped_split: int = 0
    unknown_problems: set[str] = field(default_factory=set)

    @property
    def skipped(self) -> int:
        return self.skipped_incomplete + self.skipped_no_trajectory + self.skipped_oracle + self.skipped_split


def _tool_result(call: Any) -> str:
    """The text the tool answered, as the record keeps it; records made before it was kept hold only
    the error or the answer's size."""
    if call.result_text is not None:
        return call.result_text
    if call.error is not None:
        return f"error: {call.error}"
    return f"(result not kept in the run record: {call.result_bytes} characters)"


def task_prompt(record: RunRecord, problem: ProblemFacts | None) -> str:
    """The task prompt the agent was given, as its record keeps it; for records made before prompts
    were kept, rendered again from the problem file's alert (budgets as the problem set them), or a
    note when the problem file is not at hand."""
    if record.trajectory is not None and record.trajectory.prompt is not None:
        return record.trajectory.prompt
    if problem is None:
        return f"(task prompt not available: problem {record.problem_id} not found; namespace {record.namespace})"
    try:
        budgets = AgentBudgets(**{k: v for k, v in problem.budgets.items() if k in ("steps", "seconds", "tokens")})
    except ValueError:
        budgets = AgentBudgets()
    return render_prompt(problem.alert, record.namespace, budgets)


def _numbered_calls(record: RunRecord) -> list[tuple[str, Any]]:
    """The run's tool calls in time order with the ids their messages carry (``call_0``, ...)."""
    return [(f"call_{n}", c) for n, c in enumerate(sorted(record.trajectory.tool_calls, key=lambda c: c.t))]


def _turns(record: RunRecord) -> list[list[tuple[str, Any]]]:
    """The numbered calls grouped as the model asked for them: the calls that ran between a turn's
    reply and its end (``ModelTurn.reply_t`` to ``t``) form one assistant turn; every other call (a
    policy that calls one tool a turn, a record made before reply times were kept) is its own."""
    windows = [(m.reply_t, m.t) for m in record.trajectory.model_turns if m.reply_t is not None and m.tool_calls > 1]
    groups: list[list[tuple[str, Any]]] = []
    current: tuple[float, float] | None = None
    for call_id, call in _numbered_calls(record):
        window = next((w for w in windows if w[0] <= call.t <= w[1]), None)
        if window is not None and window == current:
            groups[-1].append((call_id, call))
        else:
            groups.append([(call_id, call)])
        current = window
    return groups


def messages(record: RunRecord, problem: ProblemFacts | None = None) -> list[dict[str, Any]]:
    """The conversation: one assistant turn per model reply with the calls it asked for, each
    followed by its tool turns."""
    out: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT},
                                 {"role": "user", "content": task_prompt(record, problem)}]
    for group in _turns(record):
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": call.tool, "arguments": json.dumps(call.arguments, sort_keys=True)}}
            for call_id, call in group]})
        out.extend({"role": "tool", "tool_call_id": call_id, "content": _tool_result(call)} for call_id, call in group)
    return out


def episode(record: RunRecord, problem: ProblemFacts | None = None, *, with_ground_truth: bool = False
            ) -> dict[str, Any]:
    """One exported row: ids, reward figures and the conversation (no grader evidence)."""
    reward = record.grades.reward
    trajectory = record.trajectory
    row: dict[str, Any] = {
        "format": CHAT_FORMAT, "version": CHAT_VERSION,
        "run_id": record.run_id, "problem_id": record.problem_id, "seed": record.seed, "noise": record.noise,
        "agent": record.agent.name, "model": record.agent.model,
        "split": problem.split if problem else UNKNOWN_SPLIT, "status": record.status,
        "stop_reason": trajectory.stop_reason,
        "reward": reward.total if reward else None,
        "reward_terms": dict(reward.terms) if reward else {},
        "steps": trajectory.steps, "invalid_actions": trajectory.invalid_actions,
        "invalid_calls": [call_id for call_id, c in _numbered_calls(record) if c.invalid],
        "messages": messages(record, problem),
    }
    if with_ground_truth:
        row["ground_truth"] = problem.ground_truth if problem else None
    return row


def export_episodes(records: Iterable[RunRecord], lookup: ProblemLookup, *, include_incomplete: bool = False,
                    include_oracle: bool = False, with_ground_truth: bool = False,
                    splits: Collection[str] | None = None) -> ExportResult:
    """Rows for the records: aborted or errored runs skipped unless ``include_incomplete``; oracle
    runs (which submit the ground truth as their diagnosis) unless ``include_oracle``; runs with no
    tool call at all (nothing to learn from) always; with ``splits``, runs of problems in other
    splits (or whose problem file is not found, so whose split is unknown). Each skip is counted."""
    result = ExportResult(rows=[])
    cache: dict[str, ProblemFacts | None] = {}
    for record in records:
        if record.agent.kind == "oracle" and not include_oracle:
            result.skipped_oracle += 1
            continue
        if record.status != "completed" and not include_incomplete:
            result.skipped_incomplete += 1
            continue
        if not record.trajectory.tool_calls:
            result.skipped_no_trajectory += 1
            continue
        if record.problem_id not in cache:
            cache[record.problem_id] = lookup(record.problem_id)
        problem = cache[record.problem_id]
        if splits is not None and (problem is None or problem.split not in splits):
            result.skipped_split += 1
            continue
        if problem is None:
            result.unknown_problems.add(record.problem_id)
        result.rows.append(episode(record, problem, with_ground_truth=with_ground_truth))
    return result


def write_jsonl(rows: Iterable[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=False) + "\n")
    return path


DATASET_CARD = """\
---
{header}---

# sregym episodes ({count} runs)

Chat-format tool-calling conversations of sregym runs, one row per episode, written by
`sregym export --format hf`. Load with
`datasets.load_dataset("<this folder>")` (every split, with the features declared above: a field a row
lacks loads as null) or `datasets.load_dataset("json", data_files={{"train": "data/train-*.jsonl"}})`.

| field | meaning |
|---|---|
| `run_id`, `problem_id`, `seed`, `noise`, `agent`, `model` | the run's identity |
| `split` | the problem's split (train, dev, test; `unknown` when the problem file was not found) |
| `status`, `stop_reason` | how the run and the agent ended |
| `reward`, `reward_terms` | `grades.reward.total` and its terms (null / empty when ungraded) |
| `steps`, `invalid_actions`, `invalid_calls` | tool calls, invalid actions, ids of the refused calls |
| `messages` | OpenAI chat messages: system, user (task prompt), assistant `tool_calls`, `tool` results |
{ground_truth}
A `tool` message carries the text the tool answered (clipped at 16000 characters); rows from records
made before result text was kept carry the error text, or a note of the result's size. No grader
evidence is included beyond the reward figures.
"""


def write_hf_dataset(rows: list[dict[str, Any]], out: Path, *, with_ground_truth: bool = False) -> list[Path]:
    """``out/data/<split>-00000-of-00001.jsonl`` per split plus ``out/README.md``; returns the files.
    Raises :class:`~sregym.agentplane.dataset_features.UnrepresentableColumn` (before writing anything) when the rows fit no one schema."""
    by_split: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_split.setdefault(row["split"], []).append(row)
    # the features are declared, one schema for all splits: inferred, they come from one split alone
    header = yaml.safe_dump({
        "configs": [{"config_name": "default",
                     "data_files": [{"split": s, "path": f"data/{s}-*.jsonl"} for s in sorted(by_split)]}],
        "dataset_info": {"features": card_features(rows)},
    }, sort_keys=False)
    files = [write_jsonl(split_rows, out / "data" / f"{split}-00000-of-00001.jsonl")
             for split, split_rows in sorted(by_split.items())]
    gt = ("| `ground_truth` | the problem's ground truth (opt-in `--with-ground-truth`): a label, never shown "
          "to the agent |\n") if with_ground_truth else ""
    card = out / "README.md"
    card.write_text(DATASET_CARD.format(header=header, count=len(rows), ground_truth=gt))
    return [*files, card]
