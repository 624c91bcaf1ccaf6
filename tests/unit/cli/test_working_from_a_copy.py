"""A researcher works from a copy: of the problems folder, or of the primitives folder with one
primitive edited. The copy's plug-ins replace the built-ins of the same name (an edited one says
so; an unchanged copy is the same code and says nothing), and two of the user's own plug-ins that
claim one name are still an error. Each case runs the real CLI in a fresh process, as a user
would (the registries are per process)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]


def sregym(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # -P: like the `sregym` command, not with the working folder (and its injectors/ copy) on the path
    return subprocess.run([sys.executable, "-P", "-m", "sregym", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={"PYTHONPATH": str(REPO), "PATH": "/usr/local/bin:/usr/bin:/bin", "COLUMNS": "200"})


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "problems", tmp_path / "problems")
    shutil.copytree(REPO / "injectors", tmp_path / "injectors")
    return tmp_path


def test_a_copy_of_the_problems_folder_is_not_a_duplicate(copy: Path) -> None:
    done = sregym("validate", "--static", "shop_db_bandwidth_limit", "--problems-dir", "problems", cwd=copy)
    assert done.returncode == 0, done.stderr
    assert "1 problem(s) pass" in done.stdout


def test_a_copy_of_the_primitives_with_one_edited_replaces_that_one_and_says_so(copy: Path) -> None:
    edited = copy / "injectors" / "bandwidth_limit.py"
    edited.write_text(edited.read_text() + "\n# tuned for our lab\n")
    done = sregym("validate", "--static", "shop_db_bandwidth_limit", "--plugins", "injectors", cwd=copy)
    assert done.returncode == 0, done.stderr
    notices = [line for line in (done.stdout + done.stderr).splitlines() if "replaces the built-in" in line]
    assert len(notices) == 1 and "bandwidth_limit" in notices[0], done.stdout + done.stderr


def test_two_of_the_users_own_plugins_claiming_one_name_are_an_error(copy: Path) -> None:
    other = copy / "more"
    other.mkdir()
    edited = (copy / "injectors" / "bandwidth_limit.py").read_text() + "\n# another lab's version\n"
    (other / "my_bandwidth.py").write_text(edited)
    (copy / "injectors" / "bandwidth_limit.py").write_text(edited.replace("another lab's", "our"))
    done = sregym("validate", "--static", "shop_db_bandwidth_limit", "--plugins", "injectors", "--plugins", "more",
                  cwd=copy)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = done.stderr.replace("\n", " ")
    assert "injector 'bandwidth_limit' is registered twice: by sregym_plugin_" in said
    assert "and by sregym_plugin_" in said, said
