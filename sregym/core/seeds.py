"""Seed derivation: every random choice takes a seed derived from the run seed and a purpose."""

from __future__ import annotations

import hashlib
import random


def derive_seed(run_seed: int, *purpose: str | int) -> int:
    """A stable 63-bit seed for ``purpose`` under ``run_seed`` (same inputs, same seed, any host)."""
    text = ":".join([str(run_seed), *map(str, purpose)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def rng(run_seed: int, *purpose: str | int) -> random.Random:
    """A private ``random.Random`` for one purpose (noise schedule, random agent, ...)."""
    return random.Random(derive_seed(run_seed, *purpose))
