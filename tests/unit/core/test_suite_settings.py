"""A suite file says how its cells are played with the run-settings schema of ``run --settings``;
each cell holds one RunSettings (the suite's, with its seed and noise), and a bad field is one
clear error naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from sregym.cli.main import run_cli
from sregym.conductor.suite import suite_cells
from sregym.core.errors import ProblemFileError
from sregym.core.loader import REPO_PROBLEMS_DIR, load_catalog, load_suite_file
from sregym.core.settings import RunSettings


def suite_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "night.yaml"
    path.write_text("name: night\nproblems: [hotel_db_port_wrong]\n" + body)
    return path


def test_a_suite_file_holds_run_settings_and_each_cell_gets_its_seed_and_noise(tmp_path):
    suite = load_suite_file(suite_file(tmp_path, "settings:\n  agent: react\n  grade_window: 20\n")).suite
    assert suite.settings == RunSettings(agent="react", grade_window=20)
    cells = suite_cells(["p"], suite.settings, [0, 1], [True])
    assert [(c.settings.seed, c.settings.noise, c.settings.grade_window, c.agent) for c in cells] == \
        [(0, True, 20, "react"), (1, True, 20, "react")]


@pytest.mark.parametrize(("body", "field"), [
    ("settings:\n  agent: noop\n  grade_windw: 5\n", "settings.grade_windw: unknown field"),
    ("settings:\n  grade_window: -1\n", "settings.grade_window"),
    ("settings:\n  seed: 3\n", "settings: seed and noise are chosen per cell"),
])
def test_a_bad_settings_field_names_the_file_and_the_field(tmp_path, body, field):
    with pytest.raises(ProblemFileError) as err:
        load_suite_file(suite_file(tmp_path, body))
    assert str(tmp_path / "night.yaml") in str(err.value) and field in str(err.value)


def test_the_cli_reports_a_bad_suite_field_without_a_traceback(tmp_path, capsys):
    (tmp_path / "suites").mkdir()
    suite_file(tmp_path / "suites", "settings:\n  agnt: noop\n")
    assert run_cli(["suite", "run", "--suite", "night", "--out", str(tmp_path / "out"),
                    "--problems-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "night.yaml:4: settings.agnt: unknown field" in err and "Traceback" not in err


def test_options_override_the_suite_files_settings_and_agent_options_merge():
    suite = RunSettings(agent="react", grade_window=20, agent_options={"model": "a", "base_url": "u"})
    given = RunSettings(grade_window=30, agent_options={"model": "b"})
    merged = given.over(suite)
    assert (merged.agent, merged.grade_window, merged.agent_options) == ("react", 30, {"model": "b", "base_url": "u"})
    assert "agent" in merged.model_fields_set


def test_the_repositorys_suites_load_and_the_schema_publishes_their_settings(capsys):
    assert {"lite", "full"} <= set(load_catalog().suites)
    assert (REPO_PROBLEMS_DIR / "suites" / "lite.yaml").is_file()
    assert run_cli(["schema"]) == 0
    assert "RunSettings" in capsys.readouterr().out


def test_the_suite_file_docs_reporting_md_shows_loads(tmp_path):
    doc = (REPO_PROBLEMS_DIR.parent / "docs" / "reporting.md").read_text()
    example = doc.split("```yaml\nname: nightly_react\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "nightly_react.yaml"
    path.write_text("name: nightly_react\n" + example)
    assert load_suite_file(path).suite.settings.agent_options == {"model": "my-model"}


def test_the_cli_refuses_an_unknown_agent_by_name_before_touching_a_cluster(tmp_path, capsys, monkeypatch):
    """No cluster is reachable here: the refusal must come first, in one line, naming the known agents."""
    import sregym.cluster.providers as providers

    def no_cluster(*a, **kw):
        raise AssertionError("the cluster was looked up before the agent was checked")

    monkeypatch.setattr(providers, "current_cluster", no_cluster)
    assert run_cli(["suite", "run", "--suite", "lite", "--agent", "randm", "--executor", "jobs",
                    "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "unknown agent 'randm'" in err and "random" in err and "noop" in err and "Traceback" not in err
