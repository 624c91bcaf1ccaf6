"""A real podman build of a Dockerfile FROM the base: built once, skipped while its inputs are
unchanged, rebuilt when a context file changes (no cluster needed: --no-load)."""

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from sregym.cluster.images import archive_path, build_images, repo_root

pytestmark = pytest.mark.skipif(shutil.which("podman") is None or shutil.which("debootstrap") is None,
                                reason="needs podman and debootstrap (.ci/apt-packages.txt)")


def test_unchanged_inputs_skip_the_build_and_a_changed_file_rebuilds(tmp_path):
    (tmp_path / "images/base").mkdir(parents=True)
    # the same base recipe as the repository's: its cached archive is reused
    shutil.copy(repo_root() / "images/base/packages.txt", tmp_path / "images/base/packages.txt")
    name = f"cacheprobe{uuid.uuid4().hex[:8]}"
    ctx = tmp_path / "charts/probeapp/images" / name
    ctx.mkdir(parents=True)
    (ctx / "Dockerfile").write_text("FROM sregym/base:bookworm\nCOPY hello.txt /hello.txt\nCMD [\"cat\", \"/hello.txt\"]\n")
    (ctx / "hello.txt").write_text("first\n")
    try:
        first = build_images([name], load=False, repo=tmp_path)
        assert [r.name for r in first] == ["base", name] and first[1].status == "built"
        assert first[1].archive.is_file()
        again = build_images([name], load=False, repo=tmp_path)
        assert again[1].status == "cached" and again[1].archive == first[1].archive and again[1].seconds < 2
        (ctx / "hello.txt").write_text("second\n")
        changed = build_images([name], load=False, repo=tmp_path)
        assert changed[1].status == "built" and changed[1].refs[0] != first[1].refs[0]
        out = subprocess.run(["podman", "run", "--rm", "--ulimit", "nofile=20000:20000", "--ulimit",
                              "nproc=4096:4096", "--network", "none", "docker.io/" + changed[1].refs[0]],
                             capture_output=True, text=True, timeout=120)
        assert out.stdout == "second\n"
    finally:
        shutil.rmtree(archive_path(name, "x").parent, ignore_errors=True)
        ids = subprocess.run(["podman", "images", "-q", "--filter", f"reference=docker.io/sregym/{name}"],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["podman", "rmi", "-f", *set(ids)], capture_output=True)
