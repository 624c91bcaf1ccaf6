"""The leaderboard's pages come from records alone: escaped names, no oracle, one clear error when empty."""

import pytest
from report_records import make_record, write_records

from sregym.core.errors import UserInputError
from sregym.report.site import build_leaderboard, slug


def test_agent_names_are_escaped_and_get_safe_file_names(tmp_path):
    evil = make_record(agent="<script>alert(1)</script>")
    evil.run_id = "evil"
    results = write_records([evil, make_record(agent="ok", seed=1)], tmp_path / "results")
    index = build_leaderboard([results], tmp_path / "site", resamples=100)
    html = index.read_text()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html
    assert (index.parent / "agent" / f"{slug('<script>alert(1)</script>')}.html").is_file()
    assert "/" not in slug("a/b") and slug("a/b") != slug("a-b")


def test_entries_show_version_suite_seeds_and_dates(tmp_path):
    recs = [make_record(agent="noop", seed=s, version="0.2.0", suite="lite") for s in (0, 3)]
    index = build_leaderboard([write_records(recs, tmp_path / "r")], tmp_path / "site", resamples=100)
    row = index.read_text().split('id="leaderboard"')[1].split("</table>")[0]
    assert "<td>0.2.0</td>" in row and "<td>lite</td>" in row and "<td>0, 3</td>" in row
    assert "2026-11-20" in row


def test_only_oracle_runs_is_a_clear_error(tmp_path):
    results = write_records([make_record(agent="oracle", kind="oracle")], tmp_path / "r")
    with pytest.raises(UserInputError, match="only oracle"):
        build_leaderboard([results], tmp_path / "site")
