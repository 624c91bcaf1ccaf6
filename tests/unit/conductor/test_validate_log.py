"""``sregym validate --log/--resume``: a long ``--all`` run leaves one JSON line per problem as it
finishes, and an interrupted run continues where it stopped, skipping only what was valid."""

from __future__ import annotations

import json

from sregym.cli.main import run_cli
from sregym.conductor.validate import ProblemValidation, Step, valid_in_log
from sregym.core.jsonlines import append_json_line


def result(problem: str, *oks: bool, seed: int = 0, noise: bool = False) -> ProblemValidation:
    return ProblemValidation(problem, [Step(f"step {i}", ok, "detail", 1.5) for i, ok in enumerate(oks)],
                             seed=seed, noise=noise)


def test_only_valid_problems_count_as_done(tmp_path):
    log = tmp_path / "validate.jsonl"
    lines = [result("a_valid", True, True).record(70.0), result("b_invalid", True, False).record(90.0),
             result("c_no_steps").record(1.0)]
    log.write_text("".join(json.dumps(r) + "\n" for r in lines) + "\n")
    assert valid_in_log(log, noise=False) == {("a_valid", 0)}
    first = json.loads(log.read_text().splitlines()[0])
    assert first["seconds"] == 3.0 and first["wall_seconds"] == 70.0
    assert [s["name"] for s in first["steps"]] == ["step 0", "step 1"]


def test_a_missing_log_means_nothing_done_yet(tmp_path):
    assert valid_in_log(tmp_path / "absent.jsonl", noise=True) == set()


def test_a_line_a_kill_cut_short_is_skipped_and_the_next_starts_fresh(tmp_path):
    log = tmp_path / "validate.jsonl"
    append_json_line(log, result("a", True).record(1.0))
    with log.open("a") as f:  # killed mid-write
        f.write(json.dumps(result("b", True).record(1.0))[:20])
    assert valid_in_log(log, noise=False) == {("a", 0)}
    append_json_line(log, result("c", True).record(1.0))
    assert valid_in_log(log, noise=False) == {("a", 0), ("c", 0)}
    assert len(log.read_text().splitlines()) == 3


def test_resume_needs_the_log(capsys):
    assert run_cli(["validate", "--all", "--resume"]) == 2
    assert "--resume needs --log" in capsys.readouterr().err


def test_resume_skips_what_the_log_has_as_valid(tmp_path, capsys):
    log = tmp_path / "validate.jsonl"
    lines = [result("hotel_noop_control", True, seed=0, noise=True), result("hotel_noop_control", True, seed=1, noise=True),
             result("hotel_db_port_wrong", True, seed=0, noise=True), result("hotel_db_port_wrong", False, seed=1, noise=True),
             result("hotel_cache_wrong_port", True, seed=1, noise=False)]
    log.write_text("".join(json.dumps(r.record(66.0)) + "\n" for r in lines))
    assert run_cli(["validate", "--all", "--static", "--log", str(log), "--resume"]) == 0
    out = capsys.readouterr().out
    # every seed of the control is valid under noise; db_port_wrong still needs seed 1, and a run
    # with noise off does not count for a run with noise on
    assert "--resume: 3 problem(s) and seeds already valid" in out
    assert "hotel_noop_control" not in out and "ok hotel_db_port_wrong" in out and "ok hotel_cache_wrong_port" in out


def test_a_log_line_records_its_seed_and_noise():
    line = result("a", True, seed=1, noise=True).record(5.0)
    assert (line["seed"], line["noise"]) == (1, True)
