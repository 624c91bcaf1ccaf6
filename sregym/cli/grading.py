"""``sregym regrade``: recompute a run record's grades from the record and its problem file.

Evidence coverage, wrong remediations and the reward are pure functions of the recorded
trajectory and grades, so they are reproduced exactly (with other weights if asked). With
``--rejudge`` the diagnosis is graded again by the problem's diagnosis oracle (an LLM judge
answers anew; set the judge model with the flags or SREGYM_JUDGE_* variables). Mitigation grades
judge the live system at run time and are taken from the record as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError

from sregym.cli.options import ProblemsDirOpt
from sregym.core.errors import UserInputError
from sregym.core.loader import load_problem_arg
from sregym.core.record import RunRecord


def _read_record(path: Path) -> RunRecord:
    try:
        return RunRecord.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such run record") from None
    except ValidationError as e:
        first = e.errors()[0]
        raise UserInputError(f"{path}: not a run record: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def regrade(
    record: Annotated[Path, typer.Argument(help="A run record JSON file.")],
    problem: Annotated[Optional[str], typer.Option(help="Problem id or file (default: the record's problem id).")]
    = None,
    reward_weights: Annotated[Optional[Path], typer.Option(help="Reward weights YAML (default: oracles/reward.yaml).")]
    = None,
    rejudge: Annotated[bool, typer.Option(help="Grade the diagnosis again with the problem's diagnosis oracle.")]
    = False,
    judge_model: Annotated[Optional[str], typer.Option(help="Judge model (default: $SREGYM_JUDGE_MODEL).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="Judge endpoint (default: $SREGYM_JUDGE_BASE_URL).")]
    = None,
    budget_steps: Annotated[Optional[int], typer.Option(min=1, help="Step budget the run had (default: the problem's).")]
    = None,
    budget_seconds: Annotated[Optional[float], typer.Option(min=1, help="Time budget the run had.")] = None,
    budget_tokens: Annotated[Optional[int], typer.Option(min=1, help="Token budget the run had.")] = None,
    write: Annotated[bool, typer.Option(help="Write the new grades back into the record file.")] = False,
    problems_dir: ProblemsDirOpt = [],  # noqa: B006
) -> None:
    """Recompute evidence coverage, wrong remediations and the reward (and the diagnosis with --rejudge)."""
    from sregym.oracles import JudgeConfig, complete_grades, grade_diagnosis, load_reward_weights

    rec = _read_record(record)
    prob = load_problem_arg(problem or rec.problem_id, problems_dir).problem
    if prob.spec_hash() != rec.spec_hash:
        typer.echo(f"warning: {prob.id} has changed since the run (spec hash differs)", err=True)
    grades = rec.grades
    if rejudge:
        judge = JudgeConfig.from_env()
        judge = judge.model_copy(update={k: v for k, v in (("model", judge_model), ("base_url", judge_base_url)) if v})
        grades = grades.model_copy(update={"diagnosis": grade_diagnosis(
            prob.oracles.diagnosis, prob.ground_truth, rec.trajectory.submission("diagnosis"), judge)})
    budgets = prob.budgets.model_copy(update={k: v for k, v in (
        ("steps", budget_steps), ("seconds", budget_seconds), ("tokens", budget_tokens)) if v is not None})
    grades = complete_grades(grades, rec.trajectory, prob.ground_truth, budgets, load_reward_weights(reward_weights))
    if write:
        record.write_text(rec.model_copy(update={"grades": grades}).model_dump_json(indent=2))
    typer.echo(json.dumps(grades.model_dump(mode="json"), indent=2))


def register(app: typer.Typer) -> None:
    app.command("regrade")(regrade)
