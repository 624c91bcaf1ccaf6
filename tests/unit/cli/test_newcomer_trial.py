"""The newcomer's trial of issue 17, kept: a problem written from docs/adding-a-problem.md alone in
folders of its own ("Redis started with maxmemory 1mb and noeviction on the online shop", with a
new primitive for container args under --plugins) passes the static checks, and a misspelled
workload name is caught without a cluster, naming the file, line, field and the names the chart has.

The trial has since joined the catalog (problems/shop_redis_maxmemory_noeviction.yaml with the
built-in ``container_args``); its folders keep their own names (``trial_...``, ``startup_flags``)
so they still exercise a problem and a primitive the catalog does not have."""

from __future__ import annotations

import shutil
from pathlib import Path

from sregym.cli.main import run_cli

NEWCOMER = Path(__file__).resolve().parent / "newcomer"
PROBLEM = "trial_redis_maxmemory_noeviction"


def folders(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(NEWCOMER, tmp_path / "lab")
    return tmp_path / "lab" / "my-problems", tmp_path / "lab" / "my-injectors"


def test_the_newcomers_problem_and_primitive_pass_the_static_checks(tmp_path, capsys):
    problems, plugins = folders(tmp_path)
    code = run_cli(["validate", "--static", PROBLEM, "--problems-dir", str(problems), "--plugins", str(plugins)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "replaces the built-in" not in err  # a new primitive, not a copy of one


def test_a_wrong_workload_name_is_caught_without_a_cluster(tmp_path, capsys):
    problems, plugins = folders(tmp_path)
    path = problems / f"{PROBLEM}.yaml"
    path.write_text(path.read_text().replace("name: shop-redis, container: redis", "name: shop-rediss, container: redis"))
    assert run_cli(["validate", "--static", str(path), "--plugins", str(plugins)]) == 2
    err = capsys.readouterr().err
    assert f"{PROBLEM}.yaml:10: faults[0].target.name: online-shop's chart has no StatefulSet 'shop-rediss'" in err
    assert "shop-redis" in err.split("hint:")[1]

