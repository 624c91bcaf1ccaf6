"""A process's end, read from /proc without racing its reaper."""

from __future__ import annotations

from pathlib import Path


def ended(pid: int) -> bool:
    """Whether ``pid`` has exited: gone from /proc, or a zombie not reaped yet. Its reaper (init or a
    subreaper) may remove it between any two reads, so a read that finds it gone counts as gone."""
    try:
        return "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    except (FileNotFoundError, ProcessLookupError):
        return True
