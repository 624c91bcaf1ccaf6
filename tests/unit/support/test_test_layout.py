"""The test tree stays collectable as one run: pytest imports test files by basename (there are no
``__init__.py`` packages under tests/), so two files with the same name anywhere under tests/ stop
the whole ci tier at collection (it happened: CI collected nothing when a unit and an integration
test were both named test_no_tells.py)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]


def test_every_test_file_has_a_unique_basename():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        by_name[path.name].append(str(path.relative_to(TESTS)))
    clashes = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not clashes, f"rename one file of each pair (pytest imports by basename): {clashes}"
