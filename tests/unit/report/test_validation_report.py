"""docs/validation.md comes from ``sregym validate --log`` lines by a command: the generated block
holds one row per problem and seed (the last line for a pair wins) and the prose around it stays."""

from __future__ import annotations

import json

import pytest

from sregym.cli.main import run_cli
from sregym.conductor.validate import ProblemValidation, Step
from sregym.core.errors import UserInputError
from sregym.report.docblock import markers, replace_block


def line(problem: str, ok: bool, seed: int, detail: str = "x", **extra) -> str:
    steps = [Step("inject and verify", True, "f=api", 3.0),
             Step("mitigation oracle fails while faulty and noisy", ok, detail, 30.0)]
    return json.dumps(ProblemValidation(problem, steps, seed=seed, noise=True).record(40.0)
                      | {"checkout": "abc123"} | extra) + "\n"


def test_report_prints_one_row_per_problem_and_seed_with_the_last_line_winning(tmp_path, capsys):
    log = tmp_path / "validate.jsonl"
    log.write_text(line("p_fault", False, 0, "slo: pass 3/3") + line("p_fault", True, 0, "slo: FAIL; noise: pod_restart#0@7s")
                   + line("p_fault", True, 1, "slo: FAIL; noise: cpu_burst#0@3s") + line("p_other", False, 0, "slo: pass"))
    assert run_cli(["validate", "--report", str(log)]) == 0
    out = capsys.readouterr().out
    assert "**1 of 2 problem(s) valid on the latest run of every seed**; 3 run(s), 3 with noise on" in out
    # valid on a retry is said so: a problem that passes only sometimes is not one that always does
    assert "Earlier runs of the same seed were INVALID for 1 of them: p_fault" in out
    assert "checkout abc123" in out
    rows = [r for r in out.splitlines() if r.startswith("| `")]
    assert len(rows) == 3
    assert rows[0].startswith("| `p_fault` | 0 | on | valid (after 1 INVALID) |") and "noise pod_restart#0@7s" in rows[0]
    assert rows[1].startswith("| `p_fault` | 1 | on | valid |") and "noise cpu_burst#0@3s" in rows[1]
    assert rows[2].startswith("| `p_other` | 0 | on | **INVALID** |") and "slo: pass" in rows[2]


def test_into_rewrites_only_the_generated_block(tmp_path, capsys):
    log = tmp_path / "validate.jsonl"
    log.write_text(line("p", True, 0, "ok; noise: log_burst#0@1s"))
    doc = tmp_path / "validation.md"
    doc.write_text("# Validation\n\nintro\n\n## History\n\nby hand, kept\n")
    assert run_cli(["validate", "--report", str(log), "--into", str(doc)]) == 0
    first = doc.read_text()
    begin, end = markers("validation")
    assert first.startswith("# Validation\n\nintro\n\n## History\n\nby hand, kept\n") and begin in first
    log.write_text(line("q", True, 1, "ok; noise: log_burst#0@1s"))
    assert run_cli(["validate", "--report", str(log), "--into", str(doc)]) == 0
    second = doc.read_text()
    assert "`q`" in second and "`p`" not in second and second.count(begin) == 1 == second.count(end)
    assert "by hand, kept" in second


def test_a_missing_log_is_a_clear_error(tmp_path, capsys):
    assert run_cli(["validate", "--report", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such log file" in capsys.readouterr().err


def test_into_without_report_is_a_clear_error(tmp_path, capsys):
    assert run_cli(["validate", "--into", str(tmp_path / "x.md")]) == 2
    assert "--into goes with --report" in capsys.readouterr().err


def test_a_block_that_lost_its_end_marker_is_refused():
    begin, _ = markers("validation")
    with pytest.raises(UserInputError, match="no end marker"):
        replace_block(f"a\n{begin}\nold\n", "validation", "new", heading="## x")
