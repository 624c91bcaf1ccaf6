"""The storefront's product photos: files on web's media volume (MEDIA_DIR, a ReadWriteOnce claim),
served at /media/<file> and described (size, ETag) on every product page, which reads the photo.

The library is imported from the catalog the first time web starts on an empty volume (as a shop
imports its merchants' uploads once) and is never written again: a photo missing afterwards is
missing, not regenerated."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

MARKER = ".library"
PALETTE = ("#3b6e8f", "#8f3b5e", "#5e8f3b", "#8f7a3b", "#3b8f84", "#6a3b8f")


def library() -> Path:
    return Path(os.environ.get("MEDIA_DIR", "/var/lib/shop/media"))


def photo_name(product_id: str) -> str:
    return f"{product_id}.svg"


def photo(product_id: str, name: str) -> bytes:
    """The catalog's photo of one product (an SVG); the same bytes on every install."""
    n = int(hashlib.sha256(product_id.encode()).hexdigest(), 16)
    shapes = "".join(f'<circle cx="{40 + (n >> (8 * k)) % 320}" cy="{40 + (n >> (8 * k + 4)) % 320}" r="{12 + k * 3}" '
                     f'fill="{PALETTE[(n >> k) % len(PALETTE)]}" opacity="0.6"/>' for k in range(24))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="400" height="400" viewBox="0 0 400 400">'
            f'<rect width="400" height="400" fill="{PALETTE[n % len(PALETTE)]}"/>{shapes}'
            f'<text x="200" y="380" font-size="28" text-anchor="middle" fill="#fff">{name}</text></svg>').encode()


def import_library(products: Iterable[tuple[str, str, int]], root: Path | None = None) -> int:
    """Write the photo of every catalog product (id, name, price) into an empty library, once;
    return how many were written.

    Each file is written to a temporary name and renamed, and the marker last, so a pod stopped
    half-way imports again on its next start."""
    root = root or library()
    root.mkdir(parents=True, exist_ok=True)
    if (root / MARKER).exists():
        return 0
    written = 0
    for pid, name, _ in products:
        tmp = root / f".{photo_name(pid)}.tmp"
        tmp.write_bytes(photo(pid, name))
        os.replace(tmp, root / photo_name(pid))
        written += 1
    (root / MARKER).write_text(f"{written} photos\n")
    return written


def describe(product_id: str, root: Path | None = None) -> dict | None:
    """The product photo as a page links it (URL, size, ETag of its bytes); None when it is missing."""
    path = (root or library()) / photo_name(product_id)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return {"url": f"/media/{photo_name(product_id)}", "bytes": len(data),
            "etag": hashlib.sha256(data).hexdigest()[:16]}


def check(root: Path | None = None) -> None:
    """Readiness: the library is there (its marker readable) and its volume takes writes."""
    root = root or library()
    (root / MARKER).read_text()
    probe = root / ".ready"
    probe.write_text("ok\n")
    probe.unlink()
