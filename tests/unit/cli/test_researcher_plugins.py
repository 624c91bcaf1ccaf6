"""A researcher adds a problem (one YAML file) and a fault primitive (one module) in folders of
their own, and sregym picks both up with --problems-dir and --plugins: no engine change."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_charts import deployment, write_chart

from sregym.cli.main import run_cli

INJECTOR = '''
from pydantic import BaseModel, ConfigDict, Field
from sregym.injectors import Injector, Verification, injector


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    replicas: int = Field(0, ge=0)


@injector("lab_scale_down")
class LabScaleDown(Injector[Params]):
    """Scales a Deployment down (the researcher's own primitive)."""
    Params = Params
    targets = ("Deployment",)
    def plan(self): return {"replicas": 1}
    def inject(self, state): pass
    def verify(self, state): return Verification(True)
    def recover(self, state): pass
'''

ORACLE = '''
from sregym.core.record import CheckResult
from sregym.oracles import MitigationOracle, mitigation_oracle


@mitigation_oracle("lab_replicas_back")
class LabReplicasBack(MitigationOracle):
    def check(self): return CheckResult(name=self.name, passed=True)
'''

PROBLEM = """\
id: lab_scaled_to_zero
title: The API has no replicas
alert: "Every request to the API returns 503."
app: {name: lab_app}
faults:
  - id: scale
    injector: lab_scale_down
    params: {replicas: 0}
    target: {kind: Deployment, name: api}
noise: {per_window: 0}
ground_truth:
  root_cause: "The api Deployment was scaled to zero replicas."
  component: api
  mechanism: scaled to zero
oracles:
  mitigation: [{name: lab_replicas_back}]
difficulty: easy
tags: {layer: kubernetes, fault_family: scaling, failure_mode: unavailable}
"""


@pytest.fixture()
def lab(tmp_path: Path) -> list[str]:
    (tmp_path / "problems").mkdir()
    (tmp_path / "plugins").mkdir()
    (tmp_path / "problems" / "lab_scaled_to_zero.yaml").write_text(PROBLEM)
    (tmp_path / "plugins" / "lab_scale_down.py").write_text(INJECTOR)
    (tmp_path / "plugins" / "lab_replicas_back.py").write_text(ORACLE)
    return ["--problems-dir", str(tmp_path / "problems"), "--plugins", str(tmp_path / "plugins")]


def test_list_finds_the_researchers_problem(lab, capsys):
    assert run_cli(["list", "--json", "--app", "lab_app", *lab]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in rows] == ["lab_scaled_to_zero"]


def test_static_validation_accepts_the_researchers_injector_and_oracle(lab, tmp_path, capsys):
    charts = write_chart(tmp_path / "charts", "lab_app", [deployment("api")])
    assert run_cli(["validate", "--static", "lab_scaled_to_zero", *lab, "--charts-dir", str(charts)]) == 0
    assert "1 problem(s) pass the static checks" in capsys.readouterr().out


def test_without_the_plugins_the_injector_is_unknown(lab):
    # A fresh process: this one may already have registered the plug-in.
    proc = subprocess.run([sys.executable, "-m", "sregym", "validate", "--static", "lab_scaled_to_zero", *lab[:2]],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "faults[0].injector: unknown injector 'lab_scale_down'" in proc.stderr.replace("\n", "")


def test_show_hides_ground_truth_unless_revealed(lab, capsys):
    assert run_cli(["show", "lab_scaled_to_zero", *lab]) == 0
    hidden = capsys.readouterr().out
    assert "scaled to zero replicas" not in hidden and "lab_scale_down" not in hidden
    assert run_cli(["show", "lab_scaled_to_zero", "--reveal", *lab]) == 0
    revealed = capsys.readouterr().out
    assert "scaled to zero replicas" in revealed and "lab_scale_down" in revealed


def test_a_plugin_that_fails_to_import_names_its_file_and_line(tmp_path, capsys):
    (tmp_path / "broken.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    assert run_cli(["list", "--plugins", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'broken.py'}:2" in err and "boom" in err and "Traceback" not in err


def test_schema_writes_the_five_formats(tmp_path, capsys):
    assert run_cli(["schema", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["problem.schema.json", "run-record.schema.json", "run-settings.schema.json", "suite.schema.json",
                     "trajectory.schema.json"]
    problem = json.loads((tmp_path / "problem.schema.json").read_text())
    assert {"id", "faults", "ground_truth", "oracles"} <= set(problem["properties"])


def test_list_fits_an_80_column_terminal_with_whole_ids(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    assert run_cli(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line.rstrip()) for line in out) <= 80
    ids = {line.split()[0] for line in out if line.strip() and not line.strip().startswith(("id", "─"))}
    assert "hotel_concurrent_oom_and_reservation_probe" in ids and not any(i.endswith("…") for i in ids)
