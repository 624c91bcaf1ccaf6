"""Long commands show their progress when their output goes to a log file, not only on a terminal.

`sregym images build` takes minutes on a fresh machine; with its output redirected (CI, nohup) a
transient spinner printed nothing until the end. Now each step is a line with the time since start.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from sregym.cli.main import run_cli

pytestmark = pytest.mark.ci


def test_images_build_prints_a_line_per_step_into_a_log(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    def fake_build(only, *, load, without_binaries, provider, cluster, on_event):  # noqa: ANN001, ANN202 - no podman here
        for name, what in (("base", "building"), ("base", "built"), ("shop", "loading")):
            on_event(name, what)
        return [SimpleNamespace(name="base", refs=["sregym/base:1"], status="built", loaded=True, seconds=1.0,
                                archive=Path("/var/cache/sregym/images/base/x.tar"))]

    monkeypatch.setattr("sregym.cluster.images.build_images", fake_build)
    assert run_cli(["images", "build"]) == 0  # pytest's captured output is not a terminal
    lines = capsys.readouterr().out.splitlines()
    steps = [line for line in lines if line.startswith("[") and "s] " in line]
    assert [s.split("] ", 1)[1] for s in steps] == ["base: building", "base: built", "shop: loading"]
