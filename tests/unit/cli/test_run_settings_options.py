"""One option group builds a run's settings for `sregym run` and `sregym suite run`: a --settings
file (YAML or JSON) gives values, options given on the command line override them, and what
neither gives keeps RunSettings' defaults. Errors name the file and field or the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import sregym.cluster.providers as providers
import sregym.conductor.run as run_mod
from sregym.cli.main import run_cli
from sregym.core.settings import RunSettings

PROBLEM = "hotel_rate_bad_image_tag"


@pytest.fixture()
def played(monkeypatch: pytest.MonkeyPatch) -> list[RunSettings]:
    """The settings `sregym run` would play (the run itself stops before touching a cluster)."""
    seen: list[RunSettings] = []

    async def run_problem(problem, settings, **kw):
        seen.append(settings)
        raise SystemExit(0)

    monkeypatch.setattr(run_mod, "run_problem", run_problem)
    monkeypatch.setattr(providers, "current_cluster", lambda *a: None)
    return seen


def settings_of(played: list[RunSettings], *args: str) -> RunSettings:
    with pytest.raises(SystemExit):
        run_cli(["run", "--problem", PROBLEM, *args])
    return played.pop()


def test_without_options_a_run_plays_the_default_settings(played):
    assert settings_of(played) == RunSettings()


def test_options_build_the_settings(played):
    s = settings_of(played, "--agent", "command", "--agent-image", "mine", "--noise", "off", "--seed", "4",
                    "--budget-steps", "7", "--grade-window", "20")
    assert (s.agent, s.noise, s.seed, s.budget_steps, s.grade_window) == ("command", False, 4, 7, 20.0)
    assert s.agent_options == {"host": False, "image": "mine"}


def test_a_settings_file_gives_values_and_given_options_override_them(played, tmp_path: Path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agent": "react", "agent_options": {"model": "a"}, "seed": 3, "noise": False}))
    s = settings_of(played, "--settings", str(path), "--seed", "5", "--base-url", "http://m")
    assert (s.agent, s.seed, s.noise) == ("react", 5, False)  # --noise not given: the file's value holds
    assert s.agent_options == {"model": "a", "base_url": "http://m"}


def test_a_misspelled_field_in_a_settings_file_is_named(tmp_path: Path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text("agent: noop\ngrade_windw: 3\n")
    assert run_cli(["run", "--problem", PROBLEM, "--settings", str(path)]) == 2
    assert f"{path}:2: grade_windw: unknown field" in capsys.readouterr().err


def test_a_run_refuses_noise_both_and_sandbox_options_of_another_agent(capsys):
    assert run_cli(["run", "--problem", PROBLEM, "--noise", "both"]) == 2
    assert "--noise both is for `sregym suite run`" in capsys.readouterr().err
    assert run_cli(["run", "--problem", PROBLEM, "--agent-image", "x"]) == 2
    assert "--agent-image only apply to --agent command" in capsys.readouterr().err


def test_a_suite_still_needs_an_agent(tmp_path: Path, capsys):
    assert run_cli(["suite", "run", "--suite", "lite", "--out", str(tmp_path)]) == 2
    assert "pass --agent NAME" in capsys.readouterr().err


def test_a_job_pod_file_goes_with_the_jobs_executor(tmp_path: Path, capsys):
    (tmp_path / "pod.yaml").write_text("namespace: lab\n")
    assert run_cli(["suite", "run", "--suite", "lite", "--agent", "noop", "--out", str(tmp_path / "out"),
                    "--job-pod", str(tmp_path / "pod.yaml")]) == 2
    assert "--job-pod goes with --executor jobs" in capsys.readouterr().err


def test_the_settings_schema_is_published(capsys):
    assert run_cli(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)["run-settings"]
    assert schema["additionalProperties"] is False and "grade_window" in schema["properties"]
