"""``sregym export``: run records as chat-format tool-calling conversations (sregym.agentplane.chat_export)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from sregym.cli.options import ProblemsDirOpt, SplitOpt
from sregym.core.errors import SregymError, UserInputError

err = Console(stderr=True)


class ExportFormat(str, Enum):
    openai = "openai"
    hf = "hf"


def _problem_lookup(extra_dirs: list[Path], with_ground_truth: bool):
    """Problem facts by id (None when no file has it); the ground truth is read only when asked."""
    from sregym.core.loader import find_problem, load_problem_file
    from sregym.agentplane.chat_export import ProblemFacts

    def lookup(problem_id: str) -> ProblemFacts | None:
        try:
            problem = load_problem_file(find_problem(problem_id, extra_dirs)).problem
        except SregymError:
            return None
        return ProblemFacts(alert=problem.alert, split=problem.split.value, budgets=problem.budgets.model_dump(),
                            ground_truth=problem.ground_truth.model_dump(mode="json") if with_ground_truth else None)
    return lookup


def export(
    results: Annotated[list[Path], typer.Argument(help="results directories (or record files)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="openai: the JSONL file; hf: the dataset folder")],
    format: Annotated[ExportFormat, typer.Option("--format", help="openai: one JSONL file; hf: a Hugging Face "
                                                 "datasets folder (data/<split>-*.jsonl + README.md)")
                      ] = ExportFormat.openai,
    include_incomplete: Annotated[bool, typer.Option(
        "--include-incomplete", help="also export aborted and errored runs (skipped by default)")] = False,
    include_oracle: Annotated[bool, typer.Option(
        "--include-oracle", help="also export oracle runs: their diagnosis submission is the ground truth "
                                 "(skipped by default, like --with-ground-truth)")] = False,
    with_ground_truth: Annotated[bool, typer.Option(
        "--with-ground-truth", help="add the problem's ground truth as a `ground_truth` field (a label for "
                                    "diagnosis SFT; never in the messages). Off by default: keep it out of "
                                    "data a policy could learn to recite")] = False,
    split: SplitOpt = [],  # noqa: B006 - typer reads the default
    problems_dir: ProblemsDirOpt = [],  # noqa: B006 - typer reads the default
) -> None:
    """Export run records as OpenAI chat conversations with tool_calls, one JSON line per episode.

    Each line: run_id, problem_id, seed, noise, agent, model, split, status, stop_reason, reward
    (grades.reward.total), reward_terms, steps, invalid_actions, invalid_calls and messages
    (system, user = the task prompt, then per tool call an assistant turn with tool_calls and a tool
    turn with its tool_call_id and the text the tool answered). Grader evidence is never
    exported. See docs/training.md.
    """
    from sregym.agentplane.chat_export import export_episodes, write_hf_dataset, write_jsonl
    from sregym.agentplane.dataset_features import UnrepresentableColumn
    from sregym.report.records import load_records

    from sregym.core.problem import Split

    bad = sorted(set(split) - {s.value for s in Split})
    if bad:
        raise UserInputError(f"--split {', '.join(bad)}: a problem's split is train, dev or test",
                             hint="e.g. --split train, so test-split problems stay out of training data")
    records = load_records(results)
    if not records:
        raise UserInputError(f"no run records under {', '.join(map(str, results))}",
                             hint="pass the folder `sregym run` or `sregym suite run` wrote")
    done = export_episodes(records, _problem_lookup(problems_dir, with_ground_truth), include_incomplete=include_incomplete,
                           include_oracle=include_oracle,
                           with_ground_truth=with_ground_truth, splits=set(split) or None)
    if done.skipped_incomplete:
        err.print(f"skipped {done.skipped_incomplete} aborted or errored run(s) (--include-incomplete to keep them)")
    if done.skipped_oracle:
        err.print(f"skipped {done.skipped_oracle} oracle run(s): they recite the ground truth (--include-oracle)")
    if done.skipped_split:
        err.print(f"skipped {done.skipped_split} run(s) of other splits than {', '.join(sorted(split))}")
    if done.skipped_no_trajectory:
        err.print(f"skipped {done.skipped_no_trajectory} run(s) with no tool call")
    if done.unknown_problems:
        err.print(f"[yellow]warning:[/] problem file not found for {', '.join(sorted(done.unknown_problems))}: "
                  "no task prompt, split 'unknown' (add --problems-dir)")
    if not done.rows:
        raise UserInputError(f"no episode to export: all {len(records)} run(s) were skipped",
                             hint="--include-incomplete keeps aborted and errored runs, --include-oracle oracle runs")
    if format is ExportFormat.hf:
        try:
            files = write_hf_dataset(done.rows, out, with_ground_truth=with_ground_truth)
        except UnrepresentableColumn as e:
            raise UserInputError(f"--format hf: {e}", hint="--format openai writes the rows as plain JSON lines") from e
    else:
        files = [write_jsonl(done.rows, out)]
    err.print(f"exported {len(done.rows)} episode(s) of {len(records)} run(s) to {', '.join(map(str, files))}")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
