"""Malformed problem files, unknown names and bad parameters: each ends in one clear message that
names the file, the line and the field, exit code 2, and no traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cli_charts import configmap, deployment, write_chart
from sregym.cli.main import run_cli
from sregym.core.errors import ProblemFileError
from sregym.core.loader import load_catalog

PLUGIN = '''
from pydantic import BaseModel, ConfigDict
from sregym.core.record import CheckResult
from sregym.injectors import Injector, Verification, injector
from sregym.oracles import MitigationOracle, mitigation_oracle


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    value: str = "x"


@injector("unit_cm_key")
class UnitCmKey(Injector[Params]):
    """Sets a ConfigMap key (unit-test double: never run here)."""
    Params = Params
    targets = ("ConfigMap",)
    def inject(self, state): pass
    def verify(self, state): return Verification(True)
    def recover(self, state): pass


class OracleParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    threshold: float = 0.9


@mitigation_oracle("unit_ok")
class UnitOk(MitigationOracle):
    Params = OracleParams
    def check(self): return CheckResult(name="unit_ok", passed=True)
'''

GOOD = """\
id: {id}
title: A setting drifted
alert: "Users report wrong greetings from the web tier."
app:
  name: tinyapp
faults:
  - id: greeting
    injector: unit_cm_key
    params:
      key: greeting
    target:
      kind: ConfigMap
      name: settings
noise:
  per_window: 0
ground_truth:
  root_cause: "The settings ConfigMap key greeting was changed."
  component: settings
  mechanism: configuration value changed
oracles:
  mitigation:
    - name: unit_ok
      params:
        threshold: 0.5
difficulty: easy
tags:
  layer: application
  fault_family: config
  failure_mode: wrong_output
"""


@pytest.fixture()
def folders(tmp_path: Path) -> tuple[Path, Path]:
    problems, plugins = tmp_path / "problems", tmp_path / "plugins"
    problems.mkdir()
    plugins.mkdir()
    (plugins / "unit_cm_key.py").write_text(PLUGIN)
    write_chart(tmp_path / "charts", "tinyapp", [configmap("settings", {"greeting": "hello"}), deployment("web")])
    return problems, plugins


def write(folder: Path, text: str, name: str = "drift") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def validate(folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str], name: str = "drift") -> tuple[int, str]:
    """``sregym validate --static <file>`` (by path, so the repository's own problems stay out of it)."""
    problems, plugins = folders
    code = run_cli(["validate", "--static", str(problems / f"{name}.yaml"), "--plugins", str(plugins),
                    "--charts-dir", str(problems.parent / "charts")])
    out = capsys.readouterr()
    return code, out.err + out.out


def assert_one_clear_error(code: int, output: str, path: Path, line: int | None, field: str | None) -> None:
    assert code == 2, output
    assert "Traceback" not in output
    errors = [ln for ln in output.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, output
    where = f"{path}:{line}" if line else str(path)
    assert where in errors[0].replace("\n", ""), output
    if field:
        assert f": {field}:" in output.replace("\n", ""), output


def test_a_good_problem_passes_static_validation(folders, capsys):
    write(folders[0], GOOD.format(id="drift"))
    code, out = validate(folders, capsys)
    assert code == 0, out
    assert "1 problem(s) pass" in out


def test_yaml_syntax_error_names_its_line(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("  name: tinyapp", "  name: [tinyapp"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, None, None)
    assert "not valid YAML" in out and f"{path}:" in out


def test_empty_file_is_refused(folders, capsys):
    path = write(folders[0], "# nothing here\n")
    assert_one_clear_error(*validate(folders, capsys), path, None, None)


def test_a_list_instead_of_a_mapping_is_refused(folders, capsys):
    path = write(folders[0], "- id: drift\n")
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 1, None)
    assert "expected a mapping" in out


# (what is wrong, text in the good file, what replaces it, line, field, words the message must contain)
EDITS = [
    ("missing required field (reported at its parent's key)", "  component: settings\n", "", 16,
     "ground_truth.component", "required field is missing"),
    ("unknown field lists the known ones", "difficulty: easy", "dificulty: easy\ndifficulty: easy", 25,
     "dificulty", "unknown field (known here: schema_version"),
    ("wrong type", "    injector: unit_cm_key", "    injector: unit_cm_key\n    at: soon", 9,
     "faults[0].at", "valid number"),
    ("bad enum value", "difficulty: easy", "difficulty: extreme", 25, "difficulty", "'easy', 'medium' or 'hard'"),
    ("duplicate key", "title: A setting drifted", "title: A setting drifted\ntitle: again", 3, "title",
     "written twice"),
    ("id differs from the file name", "id: drift", "id: other_name", 1, "id", "must equal the file name"),
    ("unknown injector", "injector: unit_cm_key", "injector: unit_cm_kye", 8, "faults[0].injector",
     "unknown injector 'unit_cm_kye'"),
    ("missing injector parameter", "      key: greeting", "      value: greeting", 9, "faults[0].params.key",
     "required parameter of injector 'unit_cm_key' is missing"),
    ("unknown injector parameter", "      key: greeting", "      key: greeting\n      kee: 1", 11,
     "faults[0].params.kee", "it takes: key, value"),
    ("target kind the injector does not act on", "kind: ConfigMap", "kind: Secret", 12, "faults[0].target.kind",
     "acts on ConfigMap, not Secret"),
    ("unknown mitigation oracle", "- name: unit_ok", "- name: unit_nope", 22, "oracles.mitigation[0].name",
     "unknown mitigation oracle 'unit_nope'"),
    ("bad oracle parameter type", "threshold: 0.5", "threshold: high", 24, "oracles.mitigation[0].params.threshold",
     "valid number"),
    ("unknown noise type", "  per_window: 0", "  per_window: 1\n  types: [wobble]", 16, "noise.types[0]",
     "unknown noise type 'wobble'"),
    ("alert that names the fault plane", "Users report wrong greetings", "Injected fault in", 3, "alert",
     "must not name the fault plane"),
    ("alert that names the primitive", "Users report wrong greetings", "unit_cm_key broke greetings", 3, "alert",
     "the alert names 'unit_cm_key', which gives the fault away"),
]


@pytest.mark.parametrize(("old", "new", "line", "field", "words"), [e[1:] for e in EDITS], ids=[e[0] for e in EDITS])
def test_each_bad_edit_gets_one_message_with_file_line_and_field(folders, capsys, old, new, line, field, words):
    good = GOOD.format(id="drift")
    assert old in good
    path = write(folders[0], good.replace(old, new))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, line, field)
    assert words in out.replace("\n", ""), out


def test_two_faults_with_one_id(folders, capsys):
    text = GOOD.format(id="drift").replace("noise:", "  - id: greeting\n    injector: unit_cm_key\n"
                                                    "    params: {key: a}\nnoise:")
    path = write(folders[0], text)
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 1, None)
    assert "repeated: greeting" in out


def test_the_same_problem_id_in_two_folders(folders, tmp_path):
    write(folders[0], GOOD.format(id="drift"))
    second = tmp_path / "more"
    second.mkdir()
    path = write(second, GOOD.format(id="drift"))
    with pytest.raises(ProblemFileError) as e:
        load_catalog([folders[0], second], include_repo=False)
    assert str(e.value).startswith(f"{path}:1: id: problem id 'drift' is also defined in")


def test_unknown_problem_id_suggests_close_ids(folders, capsys):
    write(folders[0], GOOD.format(id="drift"))
    code = run_cli(["show", "drfit", "--problems-dir", str(folders[0])])
    out = capsys.readouterr().err
    assert code == 2 and "unknown problem 'drfit'" in out and "did you mean drift" in out
    assert "Traceback" not in out


def test_unknown_option_is_a_usage_error(capsys):
    assert run_cli(["list", "--no-such-flag"]) == 2
    assert "No such option" in capsys.readouterr().err


def test_the_installed_command_prints_no_traceback(folders):
    """The real console entry point, in its own process, as a user runs it."""
    path = write(folders[0], GOOD.format(id="drift").replace("difficulty: easy", "difficulty: extreme"))
    proc = subprocess.run([sys.executable, "-m", "sregym", "validate", "--static", str(path),
                           "--plugins", str(folders[1])], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{path}:25: difficulty:" in proc.stderr.replace("\n", "")


# -- names and fields that only the app's chart can prove wrong (helm template, no cluster) -------------
def test_a_misspelled_target_is_caught_against_the_rendered_chart(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("      name: settings", "      name: setings"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 13, "faults[0].target.name")
    assert "tinyapp's chart has no ConfigMap 'setings'" in out.replace("\n", "") and "settings" in out


def test_a_container_the_workload_lacks_is_caught(folders, capsys):
    text = GOOD.format(id="drift").replace("    injector: unit_cm_key\n    params:\n      key: greeting\n",
                                           "    injector: image_tag\n    params: {tag: '2'}\n")
    text = text.replace("      kind: ConfigMap\n      name: settings", "      kind: Deployment\n      name: web\n"
                                                                      "      container: wbe")
    path = write(folders[0], text)
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 13, "faults[0].target.container")
    assert "Deployment 'web' has no container 'wbe'" in out.replace("\n", "") and "its containers: web" in out


@pytest.mark.parametrize("field, expect, why", [
    ("data.greting", "{equals: hello}", "reads nothing"),            # a misspelled key
    ("data.greting", "{not_equals: bye}", "reads nothing"),          # would pass on nothing, forever
    ("data.greeting", "{equals: hi}", "fails on the healthy chart"),  # the oracle could never pass
])
def test_an_oracle_field_must_read_the_healthy_chart(folders, capsys, field, expect, why):
    oracle = (f"    - name: object_field\n      params: {{kind: configmap, name: settings, field: {field}, "
              f"expect: {expect}}}\n")
    text = GOOD.format(id="drift").replace("    - name: unit_ok\n      params:\n        threshold: 0.5\n", oracle)
    path = write(folders[0], text)
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, None, "oracles.mitigation[0].params.field")
    assert why in out.replace("\n", ""), out
