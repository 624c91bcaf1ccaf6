"""docs/adding-a-problem.md stays true: its problem file and injector module, copied into folders
of their own, pass the static checks, and its example error message is what the loader says."""

from __future__ import annotations

import re
from pathlib import Path

from sregym.cli.main import run_cli

DOC = Path(__file__).resolve().parents[3] / "docs" / "adding-a-problem.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}(?: test)?\n(.*?)```", DOC.read_text(), re.DOTALL)


def lab(tmp_path: Path, problem: str) -> list[str]:
    (tmp_path / "my-problems").mkdir(exist_ok=True)
    (tmp_path / "my-injectors").mkdir(exist_ok=True)
    (tmp_path / "my-problems" / "checkout_capacity_cut.yaml").write_text(problem)
    (tmp_path / "my-injectors" / "replica_cap.py").write_text(blocks("python")[0])
    return ["checkout_capacity_cut", "--problems-dir", str(tmp_path / "my-problems"),
            "--plugins", str(tmp_path / "my-injectors")]


def test_the_worked_example_passes_static_validation(tmp_path, capsys):
    assert run_cli(["validate", "--static", *lab(tmp_path, blocks("yaml")[0])]) == 0, capsys.readouterr().err


def test_the_documented_error_is_the_real_one(tmp_path, capsys):
    bad = blocks("yaml")[0].replace("params: {replicas: 1}", "params: {replicas: 0}")
    assert run_cli(["validate", "--static", *lab(tmp_path, bad)]) == 2
    err = capsys.readouterr().err.replace("\n", "")
    documented = re.search(r"error: my-problems/checkout_capacity_cut.yaml(:\d+: .*)", DOC.read_text()).group(1)
    assert documented in err
