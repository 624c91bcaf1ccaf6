"""A registry loaded from several threads at once never looks empty to any of them."""

from __future__ import annotations

import sys
import threading

from sregym.core.registry import Registry


def test_concurrent_first_lookups_all_see_the_plugins(tmp_path, monkeypatch):
    pkg = tmp_path / "slowplugins"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "one.py").write_text(
        "import time\nfrom tests_registry_target import REG\ntime.sleep(0.3)\n"
        "@REG.register('one')\nclass One: pass\n")
    registry = Registry("widget", builtin_package="slowplugins")
    target = type(sys)("tests_registry_target")
    target.REG = registry
    monkeypatch.setitem(sys.modules, "tests_registry_target", target)
    monkeypatch.syspath_prepend(str(tmp_path))

    found, errors = [], []

    def look() -> None:
        try:
            found.append(registry.get("one").__name__)
        except Exception as e:  # noqa: BLE001 - collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=look) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert found == ["One"] * 4
