"""The volume read script that `volume_readable` runs in the data store's pod."""

from __future__ import annotations

import subprocess

from oracles.storage import READ_ALL


def _run(script: str, path) -> str:
    return subprocess.run(["sh", "-c", script, "sh", str(path)], capture_output=True, text=True, check=True).stdout


def test_readable_files_are_counted_without_failures(tmp_path):
    (tmp_path / "a").write_text("x")
    (tmp_path / "b").write_text("y")
    assert _run(READ_ALL, tmp_path).split() == ["COUNT", "2"]


def test_a_file_removed_between_listing_and_reading_is_not_a_read_error(tmp_path):
    victim = tmp_path / "pg_internal.init"
    victim.write_text("x")
    racing = READ_ALL.replace("n=$((n+1))", f'n=$((n+1)); [ "$f" = "{victim}" ] && rm -f "$f"')
    out = _run(racing, tmp_path)
    assert "FAIL" not in out and "COUNT 1" in out


def test_an_unreadable_file_is_reported(tmp_path):
    (tmp_path / "dir-not-file").mkdir()
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    fifo_free = blocked / "x"
    fifo_free.write_text("x")
    # A file that exists but cannot be read: a dangling-free approach is a path the reader lacks
    # rights to; as root, simulate an EIO-like failure with a directory masquerading as a file.
    script = READ_ALL.replace('find "$P" -type f', 'printf "%s\\n" "$P/dir-not-file"')
    assert "FAIL" in _run(script, tmp_path)
