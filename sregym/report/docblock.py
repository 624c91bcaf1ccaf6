"""Generated blocks inside hand-written docs: a command rewrites only what lies between its
markers, so the prose and history around it stay as written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import sregym
from sregym.core.errors import UserInputError


def markers(name: str) -> tuple[str, str]:
    return f"<!-- generated:{name}:begin -->", f"<!-- generated:{name}:end -->"


def replace_block(text: str, name: str, block: str, *, heading: str) -> str:
    """``text`` with the block ``name`` replaced by ``block``; when it has none yet, a section
    ``heading`` holding the block is added at the end."""
    begin, end = markers(name)
    body = f"{begin}\n{block.rstrip()}\n{end}"
    if begin in text:
        head, _, rest = text.partition(begin)
        if end not in rest:
            raise UserInputError(f"the generated block {name!r} has no end marker {end!r}",
                                 hint="put the end marker back after the generated table, or delete the block")
        return head + body + rest.partition(end)[2]
    return text.rstrip() + f"\n\n{heading}\n\n{body}\n"


def write_block(path: Path, name: str, block: str, *, heading: str) -> None:
    """Rewrite the block ``name`` of the markdown file ``path`` (created if missing)."""
    text = path.read_text() if path.is_file() else ""
    path.write_text(replace_block(text, name, block, heading=heading))


def checkout() -> str:
    """``git describe`` of the checkout sregym runs from (``--dirty`` when it has changes), or the
    package version outside a git checkout."""
    root = Path(sregym.__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return sregym.__version__
    return out.stdout.strip() or sregym.__version__
