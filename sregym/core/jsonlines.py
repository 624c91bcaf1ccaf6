"""Append-only JSON-lines files that a killed process may have cut short (the suite's index,
``sregym validate --log``): readers skip a broken line, writers start on a fresh one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def read_json_lines(path: Path, keys: set[str]) -> list[dict[str, Any]]:
    """The objects in ``path`` that have every one of ``keys``; a line a kill cut short is skipped."""
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and keys <= entry.keys():
            entries.append(entry)
    return entries


def append_json_line(path: Path, entry: dict[str, Any]) -> None:
    """Append ``entry`` as one line, first finishing a line a kill cut short so it is not glued on."""
    if path.is_file() and path.stat().st_size:
        with path.open("rb+") as f:
            f.seek(-1, 2)
            if f.read(1) != b"\n":
                f.write(b"\n")
    with path.open("a") as f:
        f.write(json.dumps(entry) + "\n")
        f.flush()
        os.fsync(f.fileno())
