"""Find and read run records in results directories.

A results directory is whatever ``sregym run`` or ``sregym suite run`` wrote. When it holds a suite
index (``index.jsonl``) the records it lists are read; otherwise every ``*.json`` below it that is a
run record is. Other JSON files (journals, metrics.json of an earlier report) are passed over. The
same run found twice (a copy of a record) counts once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from sregym.core.errors import UserInputError
from sregym.core.record import RunRecord

INDEX_FILE = "index.jsonl"


def _looks_like_record(data: object) -> bool:
    return isinstance(data, dict) and "run_id" in data and "problem_id" in data and "agent" in data


def read_record(path: Path) -> RunRecord:
    """One record file; a malformed record is a user error naming the file and field."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UserInputError(f"{path}: not a readable JSON run record: {e}") from None
    try:
        return RunRecord.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"]) or "(root)"
        raise UserInputError(f"{path}: {loc}: {first['msg']}",
                             hint="the record was written by an incompatible sregym version or edited") from None


def indexed_record_paths(directory: Path) -> list[Path]:
    """Record files a suite index lists: for a cell run more than once (a retried error), its last
    run only. Lines a kill cut short are skipped."""
    latest: dict[object, Path] = {}
    for n, line in enumerate((directory / INDEX_FILE).read_text().splitlines()):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict) and entry.get("record"):
            cell = tuple(entry.get(k) for k in ("agent", "problem_id", "seed", "noise"))
            latest[cell if None not in cell else n] = directory / entry["record"]
    return list(latest.values())


def record_paths(directory: Path) -> list[Path]:
    """Candidate record files under one results directory."""
    if (directory / INDEX_FILE).is_file():
        return [p for p in indexed_record_paths(directory) if p.is_file()]
    out = []
    for path in sorted(directory.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            continue
        if _looks_like_record(data):
            out.append(path)
    return out


def load_records(paths: Iterable[Path | str]) -> list[RunRecord]:
    """Every run record in the given files or directories, each run once, in a stable order."""
    seen: dict[str, RunRecord] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise UserInputError(f"{path}: no such file or directory", hint="pass a results directory or record file")
        files = [path] if path.is_file() else record_paths(path)
        for file in files:
            record = read_record(file)
            seen.setdefault(record.run_id, record)
    return sorted(seen.values(), key=lambda r: (r.agent.name, r.problem_id, r.seed, r.noise, r.run_id))
