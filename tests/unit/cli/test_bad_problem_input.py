"""Malformed problem files, unknown names and bad parameters: each ends in one clear message that
names the file, the line and the field, exit code 2, and no traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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
    return problems, plugins


def write(folder: Path, text: str, name: str = "drift") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def validate(folders: tuple[Path, Path], capsys: pytest.CaptureFixture[str], name: str = "drift") -> tuple[int, str]:
    """``sregym validate --static <file>`` (by path, so the repository's own problems stay out of it)."""
    problems, plugins = folders
    code = run_cli(["validate", "--static", str(problems / f"{name}.yaml"), "--plugins", str(plugins)])
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


def test_missing_required_field_points_at_its_parent(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("  component: settings\n", ""))
    code, out = validate(folders, capsys)
    # ground_truth: starts on line 16; the missing key is reported there.
    assert_one_clear_error(code, out, path, 16, "ground_truth.component")
    assert "required field is missing" in out


def test_unknown_field_is_a_typo_with_the_known_fields_listed(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("difficulty: easy", "dificulty: easy\ndifficulty: easy"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 25, "dificulty")
    assert "unknown field" in out and "difficulty" in out


def test_wrong_type_names_the_line_of_the_value(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("    injector: unit_cm_key",
                                                             "    injector: unit_cm_key\n    at: soon"))
    assert_one_clear_error(*validate(folders, capsys), path, 9, "faults[0].at")


def test_bad_enum_value(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("difficulty: easy", "difficulty: extreme"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 25, "difficulty")
    assert "easy" in out and "hard" in out


def test_duplicate_key_is_refused(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("title: A setting drifted",
                                                             "title: A setting drifted\ntitle: again"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 3, "title")
    assert "twice" in out


def test_id_must_match_the_file_name(folders, capsys):
    path = write(folders[0], GOOD.format(id="other_name"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 1, "id")
    assert "file name" in out


def test_unknown_injector_suggests_a_close_name(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("injector: unit_cm_key", "injector: unit_cm_kye"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 8, "faults[0].injector")
    assert "unknown injector 'unit_cm_kye'" in out and "unit_cm_key" in out


def test_missing_injector_parameter(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("      key: greeting", "      value: greeting"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 9, "faults[0].params.key")
    assert "required parameter" in out


def test_unknown_injector_parameter_lists_the_known_ones(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("      key: greeting", "      key: greeting\n      kee: 1"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 11, "faults[0].params.kee")
    assert "it takes: key, value" in out


def test_target_kind_the_injector_does_not_act_on(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("kind: ConfigMap", "kind: Secret"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 12, "faults[0].target.kind")
    assert "acts on ConfigMap" in out


def test_unknown_mitigation_oracle(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("- name: unit_ok", "- name: unit_nope"))
    assert_one_clear_error(*validate(folders, capsys), path, 22, "oracles.mitigation[0].name")


def test_bad_oracle_parameter_type(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("threshold: 0.5", "threshold: high"))
    assert_one_clear_error(*validate(folders, capsys), path, 24, "oracles.mitigation[0].params.threshold")


def test_unknown_noise_type(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("  per_window: 0", "  per_window: 1\n  types: [wobble]"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 16, "noise.types[0]")
    assert "unknown noise type 'wobble'" in out


def test_alert_that_names_the_fault_plane_is_refused(folders, capsys):
    path = write(folders[0], GOOD.format(id="drift").replace("Users report wrong greetings", "Injected fault in"))
    code, out = validate(folders, capsys)
    assert_one_clear_error(code, out, path, 3, "alert")


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
