"""Image discovery, input hashing and build order (pure logic over a temporary repository)."""

from pathlib import Path

import pytest

from sregym.cluster.imagebuild import recipes
from sregym.core.errors import UnknownNameError, UserInputError


def make_repo(tmp_path: Path) -> Path:
    (tmp_path / "images/base").mkdir(parents=True)
    (tmp_path / "images/base/packages.txt").write_text("python3\n")
    svc = tmp_path / "charts/shopapp/images/web"
    svc.mkdir(parents=True)
    (svc / "Dockerfile").write_text("FROM sregym/base:bookworm\nCOPY app.py /app.py\n")
    (svc / "app.py").write_text("print('hi')\n")
    (svc / "__pycache__").mkdir()
    (svc / "__pycache__/app.cpython-311.pyc").write_bytes(b"junk")
    return tmp_path


def test_discovers_base_and_chart_dockerfiles_named_by_folder(tmp_path):
    found = recipes.discover(make_repo(tmp_path))
    assert sorted(found) == ["base", "web"]
    assert found["base"].kind == "debootstrap" and found["base"].alias_tag == "bookworm"
    assert found["web"].parents == ("base",)
    assert [p.name for p in found["web"].files] == ["Dockerfile", "app.py"]


def test_hash_changes_with_context_file_and_with_parent(tmp_path):
    repo = make_repo(tmp_path)
    before = recipes.discover(repo)
    h_web = recipes.input_hash(before["web"], before)
    (repo / "charts/shopapp/images/web/app.py").write_text("print('changed')\n")
    after = recipes.discover(repo)
    assert recipes.input_hash(after["web"], after) != h_web
    h_web2 = recipes.input_hash(after["web"], after)
    (repo / "images/base/packages.txt").write_text("python3\ncurl\n")
    again = recipes.discover(repo)
    assert recipes.input_hash(again["web"], again) != h_web2


def test_hash_ignores_bytecode_and_is_stable(tmp_path):
    repo = make_repo(tmp_path)
    first = recipes.discover(repo)
    h = recipes.input_hash(first["web"], first)
    (repo / "charts/shopapp/images/web/__pycache__/other.pyc").write_bytes(b"more junk")
    second = recipes.discover(repo)
    assert recipes.input_hash(second["web"], second) == h


def test_tags_are_hash_prefix_and_alias(tmp_path):
    found = recipes.discover(make_repo(tmp_path))
    assert recipes.tags(found["web"], "ab" * 32) == ("sregym/web:abababababab", "sregym/web:latest")


def test_build_order_puts_parents_first(tmp_path):
    found = recipes.discover(make_repo(tmp_path))
    assert [r.name for r in recipes.build_order(found, ["web"])] == ["base", "web"]


def test_unknown_image_name_is_a_user_error(tmp_path):
    found = recipes.discover(make_repo(tmp_path))
    with pytest.raises(UnknownNameError):
        recipes.build_order(found, ["nope"])


def test_from_an_undefined_sregym_image_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "charts/shopapp/images/web/Dockerfile").write_text("FROM sregym/missing:latest\n")
    with pytest.raises(UserInputError, match="missing"):
        recipes.discover(repo)


def test_names_that_would_reveal_a_fault_are_refused(tmp_path):
    repo = make_repo(tmp_path)
    bad = repo / "charts/shopapp/images/chaos-agent"
    bad.mkdir()
    (bad / "Dockerfile").write_text("FROM sregym/base:bookworm\n")
    with pytest.raises(UserInputError, match="chaos"):
        recipes.discover(repo)


def test_same_folder_name_in_two_charts_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    dup = repo / "charts/otherapp/images/web"
    dup.mkdir(parents=True)
    (dup / "Dockerfile").write_text("FROM sregym/base:bookworm\n")
    with pytest.raises(UserInputError, match="defined twice"):
        recipes.discover(repo)


def test_sregym_parents_reads_qualified_and_platform_from_lines():
    text = "FROM --platform=linux/amd64 docker.io/sregym/base:bookworm AS b\nFROM sregym/web@sha256:1\nFROM debian\n"
    assert recipes.sregym_parents(text) == ("base", "web")


def test_an_assembled_image_is_built_only_when_named_and_hashes_what_it_copies(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "tool").mkdir()
    (repo / "tool/main.py").write_text("print(1)\n")
    runner = repo / "images/runner"
    runner.mkdir()
    (runner / "Dockerfile").write_text("FROM sregym/base:bookworm\nCOPY repo /opt/x\n")
    (runner / "context.txt").write_text("# comment\ntool\nbinary kubectl\n")
    found = recipes.discover(repo)
    assert [dest for _, dest in found["runner"].extra_files] == ["repo/tool/main.py"]
    assert [name for name, _ in found["runner"].binaries] == ["kubectl"]
    assert "runner" not in [r.name for r in recipes.build_order(found)]
    assert [r.name for r in recipes.build_order(found, ["runner"])] == ["base", "runner"]
    before = recipes.input_hash(found["runner"], found)
    (repo / "tool/main.py").write_text("print(2)\n")
    again = recipes.discover(repo)
    assert recipes.input_hash(again["runner"], again) != before


def test_an_assembled_context_naming_a_missing_path_is_refused_with_its_line(tmp_path):
    repo = make_repo(tmp_path)
    runner = repo / "images/runner"
    runner.mkdir()
    (runner / "Dockerfile").write_text("FROM sregym/base:bookworm\n")
    (runner / "context.txt").write_text("pyproject.toml\n")
    with pytest.raises(UserInputError, match=r"context.txt:1: 'pyproject.toml' is not a path"):
        recipes.discover(repo)


def test_images_that_take_a_go_binary_through_a_parent_are_told_apart_for_the_install_beside_go(tmp_path):
    """scripts/install.sh builds, beside the Go builds, only the images that need none of their binaries."""
    repo = make_repo(tmp_path)
    runner = repo / "images/runner"
    runner.mkdir()
    (runner / "Dockerfile").write_text("FROM sregym/base:bookworm\n")
    (runner / "context.txt").write_text("binary kubectl\n")
    child = repo / "images/child"
    child.mkdir()
    (child / "Dockerfile").write_text("FROM sregym/runner:latest\n")
    files = repo / "images/files"
    files.mkdir()
    (files / "Dockerfile").write_text("FROM sregym/base:bookworm\n")
    (files / "context.txt").write_text("images/base/packages.txt\n")  # repository files, no binary
    found = recipes.discover(repo)
    assert {name for name in found if recipes.needs_binaries(name, found)} == {"runner", "child"}
    assert not recipes.needs_binaries("web", found) and not recipes.needs_binaries("base", found)
    assert not recipes.needs_binaries("files", found)
