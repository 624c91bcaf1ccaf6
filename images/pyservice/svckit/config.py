"""Settings come from the environment only (ConfigMaps and Secrets), like any twelve-factor service.

A missing or malformed required setting stops the process with one clear log line."""

from __future__ import annotations

import os
import sys


def _fail(name: str, why: str) -> None:
    sys.stderr.write(f'{{"level":"critical","msg":"bad setting {name}: {why}"}}\n')
    raise SystemExit(2)


def text(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        _fail(name, "not set")
    return value


def integer(name: str, default: int | None = None) -> int:
    raw = text(name, None if default is None else str(default))
    try:
        return int(raw)
    except ValueError:
        _fail(name, f"{raw!r} is not an integer")
    raise AssertionError


def number(name: str, default: float | None = None) -> float:
    raw = text(name, None if default is None else str(default))
    try:
        return float(raw)
    except ValueError:
        _fail(name, f"{raw!r} is not a number")
    raise AssertionError


def flag(name: str, default: bool = False) -> bool:
    return text(name, "true" if default else "false").strip().lower() in ("1", "true", "yes", "on")


def service_name() -> str:
    return text("SERVICE_NAME")
