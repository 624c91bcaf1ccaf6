"""Waiting on a live cluster: one poll loop for every integration test."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def eventually(check: Callable[[], Any], timeout: float = 120.0, every: float = 1.0, what: str | None = None) -> Any:
    """The first truthy result of ``check()`` within ``timeout`` seconds. When none comes: None,
    or, if ``what`` is given, the test fails naming it and the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(every)
    if what is None:
        return None
    pytest.fail(f"{what} did not hold within {timeout:.0f}s (last: {last!r})")
