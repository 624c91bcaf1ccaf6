"""The loader: source lines of fields, filters, suites, and problems given by path."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sregym.core.errors import ProblemFileError, UnknownNameError
from sregym.core.loader import format_loc, load_catalog, load_problem_arg, read_yaml


def problem_yaml(pid: str, *, app: str = "shop", difficulty: str = "easy", split: str = "test",
                 family: str = "config") -> str:
    return textwrap.dedent(f"""\
        id: {pid}
        title: t
        alert: "Checkout requests fail for many users."
        app: {{name: {app}}}
        no_op: true
        noise: {{per_window: 0}}
        ground_truth: {{root_cause: "nothing is wrong at all", component: none, mechanism: none}}
        oracles: {{mitigation: [{{name: anything}}]}}
        difficulty: {difficulty}
        split: {split}
        tags: {{layer: application, fault_family: {family}, failure_mode: errors, extra: [x]}}
        """)


@pytest.fixture()
def catalog_dir(tmp_path: Path) -> Path:
    d = tmp_path / "problems"
    (d / "suites").mkdir(parents=True)
    (d / "a_easy.yaml").write_text(problem_yaml("a_easy"))
    (d / "b_hard.yaml").write_text(problem_yaml("b_hard", app="hotel", difficulty="hard", split="dev", family="disk"))
    (d / "c_medium.yaml").write_text(problem_yaml("c_medium", difficulty="medium", split="train"))
    (d / "suites" / "mini.yaml").write_text("name: mini\nproblems: [b_hard]\nquery: {difficulty: easy}\n")
    return d


def test_format_loc_reads_like_yaml():
    assert format_loc(("faults", 0, "params", "port")) == "faults[0].params.port"
    assert format_loc(()) == "(top level)"


def test_source_map_finds_nested_fields(tmp_path: Path):
    path = tmp_path / "x.yaml"
    path.write_text("a:\n  b:\n    - c: 1\n    - c: 2\n      d: [1, 2]\n")
    _, source = read_yaml(path)
    assert source.line(("a", "b", 1, "c")) == 4
    assert source.line(("a", "b", 1, "d", 1)) == 5
    assert source.line(("a", "b", 1, "missing")) == 4  # the parent item
    assert source.line(("a", "b")) == 2  # a nested list is found at its key


def test_filters_combine(catalog_dir: Path):
    cat = load_catalog([catalog_dir], include_repo=False)
    ids = lambda lps: [lp.id for lp in lps]  # noqa: E731
    assert ids(cat.select(difficulty=["easy", "hard"])) == ["a_easy", "b_hard"]
    assert ids(cat.select(app=["shop"], split=["train"])) == ["c_medium"]
    assert ids(cat.select(tags=["disk", "application"])) == ["b_hard"]
    assert ids(cat.select(tags=["disk", "config"])) == []


def test_suite_takes_its_ids_then_its_query(catalog_dir: Path):
    cat = load_catalog([catalog_dir], include_repo=False)
    assert [lp.id for lp in cat.suite_problems("mini")] == ["b_hard", "a_easy"]
    with pytest.raises(UnknownNameError):
        cat.suite("maxi")


def test_suite_with_an_unknown_problem_names_its_line(catalog_dir: Path):
    (catalog_dir / "suites" / "bad.yaml").write_text("name: bad\nproblems:\n  - a_easy\n  - zzz\n")
    with pytest.raises(ProblemFileError) as e:
        load_catalog([catalog_dir], include_repo=False).suite_problems("bad")
    assert e.value.line == 4 and e.value.field == "problems[1]"


def test_a_problem_can_be_given_by_path(catalog_dir: Path):
    assert load_problem_arg(str(catalog_dir / "b_hard.yaml")).problem.app.name == "hotel"
    with pytest.raises(ProblemFileError):
        load_problem_arg(str(catalog_dir / "nope.yaml"))


def test_missing_problems_dir_is_a_user_error(tmp_path: Path):
    with pytest.raises(ProblemFileError) as e:
        load_catalog([tmp_path / "nowhere"], include_repo=False)
    assert "not a folder" in str(e.value)
