"""Live progress of a run, phase by phase, and the time each phase took."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console


class Phases:
    """Times each phase into ``durations``; shows a spinner and a line per phase when ``console``
    is given (the CLI passes one on stderr; the suite runner may pass none)."""

    def __init__(self, console: Console | None = None, *, label: str = ""):
        self.console = console
        self.label = f"{label}: " if label else ""
        self.durations: dict[str, float] = {}
        self.starts: dict[str, float] = {}  # seconds from this object's creation to each phase's first start
        self._t0 = time.monotonic()

    @contextmanager
    def phase(self, name: str, what: str = "", *, spinner: bool = True) -> Iterator[None]:
        """Time a phase. ``spinner=False`` for one that runs alongside another (a console shows one
        spinner at a time): it only prints its line when it ends."""
        start = time.monotonic()
        self.starts.setdefault(name, round(start - self._t0, 3))
        status = self.console.status(f"{self.label}[bold]{name}[/] {what}") if self.console and spinner else None
        ok = False
        try:
            if status:
                status.start()
            yield
            ok = True
        finally:
            if status:
                status.stop()
            took = time.monotonic() - start
            self.durations[name] = round(self.durations.get(name, 0.0) + took, 3)
            if self.console:
                mark = "[green]✓[/]" if ok else "[red]✗[/]"
                self.console.print(f"{mark} {self.label}{name} {what} [dim]{took:.1f}s[/]")

    def note(self, message: str) -> None:
        if self.console:
            self.console.print(f"  {self.label}{message}", highlight=False)
