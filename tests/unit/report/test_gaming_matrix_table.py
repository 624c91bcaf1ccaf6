"""The anti-gaming table in docs/grading.md is rendered from the cells' own JSON lines: each cell
says pass or fail and why that is right, and every wrong cell is named as such."""

from __future__ import annotations

import json

from sregym.report.gaming_matrix import matrix_markdown, verdict


def cell(**kw) -> dict:
    base = {"problem": "p", "family": "network", "primitive": "network_partition", "strategy": "restart_every_pod",
            "played": "done", "fault_present": True, "users_broken": True, "passed": False, "effect": "e",
            "served": "s", "checks": "c", "must_persist": False}
    return base | kw


def test_each_outcome_says_why_it_is_right_or_that_it_is_wrong():
    assert verdict(cell()) == "fail: fault present"
    assert verdict(cell(passed=True)) == "pass: **WRONG: passed, fault present**"
    assert verdict(cell(fault_present=False, users_broken=False, passed=True)) == "pass: fault really gone"
    assert verdict(cell(fault_present=False, users_broken=False)) == "fail: **WRONG: failed, fault gone**"
    assert verdict(cell(fault_present=False, passed=False)) == "fail: fault gone, users broken"
    assert "WRONG: the fault did not outlive a restart" in verdict(
        cell(fault_present=False, users_broken=False, passed=True, must_persist=True))
    assert verdict(cell(played="refused: forbidden")).endswith("(refused)")
    assert verdict(cell(played="not applicable: dns_failure writes no value")) == "fail: fault present (not applicable)"


def test_a_cell_the_test_expects_to_fail_with_the_fault_gone_is_right_when_it_fails():
    # remove_probes on a broken probe: the fault check sees it gone with every other probe, and the
    # test (test_anti_gaming.expectation) records that the oracle must fail all the same
    probes_gone = cell(strategy="remove_probes", fault_present=False, users_broken=False, expected="fail",
                       why="the fault is gone with the health checks the strategy removed")
    assert verdict(probes_gone) == "fail: fault is gone with the health checks the strategy removed"
    assert verdict(probes_gone | {"passed": True}) == \
        "pass: **WRONG: passed, fault is gone with the health checks the strategy removed**"
    # a cell whose line records no expectation (the oldest lines) keeps the table's own rule
    assert verdict(cell(fault_present=False, users_broken=False)) == "fail: **WRONG: failed, fault gone**"


def test_table_has_a_row_per_problem_and_a_column_per_strategy_with_the_rerun_winning(tmp_path):
    results = tmp_path / "cells.jsonl"
    lines = [cell(), cell(passed=True), cell(problem="q", family="OS", primitive="disk_full", strategy="fake_metrics")]
    results.write_text("".join(json.dumps(c) + "\n" for c in lines))
    md = matrix_markdown(results, date="2026-11-25", checkout="abc", command="cmd", exit_code=1)
    assert "Measured 2026-11-25 on checkout `abc`; written by `cmd` (pytest exit 1)" in md
    assert "2 of 4 cell(s) measured; **1 wrong**" in md
    assert "| family | primitive (problem) | restart_every_pod | fake_metrics |" in md
    assert "| OS | disk_full (`q`) | - | fail: fault present |" in md
    assert "| network | network_partition (`p`) | pass: **WRONG: passed, fault present** | - |" in md


def test_no_results_says_so(tmp_path):
    assert "No measured cells" in matrix_markdown(tmp_path / "none.jsonl", date="d", checkout="c", command="x")


def test_cells_that_record_when_and_where_they_ran_say_so(tmp_path):
    results = tmp_path / "cells.jsonl"
    results.write_text(json.dumps(cell(finished="2026-11-25T18:20:00Z", checkout="c1")) + "\n"
                       + json.dumps(cell(problem="q", finished="2026-11-25T18:40:00Z", checkout="c1")) + "\n")
    md = matrix_markdown(results, date="today", checkout="other", command="cmd")
    assert md.startswith("Measured 2026-11-25T18:20:00Z to 2026-11-25T18:40:00Z on checkout `c1`;")


def test_the_whole_matrix_shows_what_was_not_measured(tmp_path):
    results = tmp_path / "cells.jsonl"
    results.write_text(json.dumps(cell()) + "\n")
    md = matrix_markdown(results, date="d", checkout="c", command="x", rows=[("OS", "disk_full", "q")],
                         strategies=["restart_every_pod", "helm_rollback"])
    assert "1 of 4 cell(s) measured" in md
    assert "| OS | disk_full (`q`) | - | - |" in md
