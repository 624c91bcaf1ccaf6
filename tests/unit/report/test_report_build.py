"""`sregym report` builds its markdown, metrics.json and every figure from a synthetic record set."""

import json

import pytest
from report_records import make_record, synthetic_suite, write_records

from sregym.core.errors import UserInputError
from sregym.report import plots
from sregym.report.build import build_report
from sregym.report.records import load_records
from sregym.report.tables import fmt
from sregym.report.bootstrap import Estimate


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    results = write_records(synthetic_suite(), tmp_path_factory.mktemp("results"))
    return build_report([results], resamples=300)


def test_report_writes_markdown_json_and_every_figure_as_png_and_svg(built):
    assert built.markdown.name == "report.md" and built.markdown.parent.name == "report"
    for name in plots.FIGURES:
        png = built.markdown.parent / "figures" / f"{name}.png"
        svg = png.with_suffix(".svg")
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert png.stat().st_size > 10_000, name  # a drawn figure, not an empty canvas
        assert "<svg" in svg.read_text()[:500], name


def test_markdown_has_agent_breakdown_and_problem_tables(built):
    md = built.markdown.read_text()
    for heading in ("## Agents", "## By difficulty", "## By layer", "## By failure mode", "## By noise",
                    "## End-to-end success per problem", "## Tool calls"):
        assert heading in md
    agent_rows = [line for line in md.splitlines() if line.startswith("| react (m-1) | 24 |")]
    assert len(agent_rows) == 1
    assert "| oracle | 24 | 0 | 100% | 100% | 100% |" in md
    assert "Reference agents (upper bounds, never ranked): oracle." in md


def test_metrics_json_carries_estimates_with_intervals(built):
    data = json.loads(built.metrics_json.read_text())
    assert data["runs"] == 96
    react = next(a for a in data["agents"] if a["keys"]["agent"] == "react (m-1)")
    e2e = react["metrics"]["e2e"]
    assert e2e["lo"] <= e2e["value"] <= e2e["hi"] and e2e["n"] == 24 and e2e["problems"] == 6
    assert {b for b in data["breakdowns"]} == {"difficulty", "layer", "failure_mode", "noise"}


def test_an_empty_results_directory_is_a_clear_user_error(tmp_path):
    with pytest.raises(UserInputError, match="no run records found"):
        build_report([tmp_path])


def test_a_broken_record_names_its_file_and_field(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"run_id": "x", "problem_id": "p", "agent": {"name": "a"}}))
    with pytest.raises(UserInputError, match=r"bad\.json: .*"):
        load_records([tmp_path])


def test_the_same_run_found_twice_counts_once(tmp_path):
    rec = make_record()
    write_records([rec], tmp_path / "a")
    write_records([rec], tmp_path / "b")
    assert len(load_records([tmp_path])) == 1


def test_estimates_print_with_their_interval_in_the_metric_unit():
    assert fmt(Estimate(0.625, 0.42, 0.83), "e2e") == "62% [42-83%]"
    assert fmt(Estimate(1.0, 1.0, 1.0), "e2e") == "100%"
    assert fmt(Estimate(112.4, 85, 139), "ttm_s") == "112s [85-139s]"
    assert fmt(Estimate(3650, 3500, 3800), "tokens") == "3.6k [3.5k-3.8k]"
    assert fmt(Estimate(None), "e2e") == "n/a"


def test_a_retried_cell_counts_once_with_its_last_run(tmp_path):
    import json as _json

    first = make_record(problem="p1", status="error")
    second = first.model_copy(update={"run_id": "retry", "status": "completed"})
    write_records([first, second], tmp_path)
    with (tmp_path / "index.jsonl").open("w") as f:
        for r in (first, second):
            f.write(_json.dumps({"run_id": r.run_id, "problem_id": r.problem_id, "agent": r.agent.name,
                                 "seed": r.seed, "noise": r.noise, "status": r.status,
                                 "record": f"{r.run_id}.json"}) + "\n")
    assert [r.status for r in load_records([tmp_path])] == ["completed"]


def test_an_interval_narrower_than_the_shown_precision_is_left_out():
    assert fmt(Estimate(0.21, 0.2, 0.24), "ttm_s") == "0s"
