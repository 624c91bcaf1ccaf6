"""Which mechanisms of each registered primitive a node's capabilities allow (for `sregym doctor`)."""

from __future__ import annotations

from dataclasses import dataclass

from sregym.injectors._api import INJECTORS


@dataclass(frozen=True)
class MechanismSupport:
    injector: str
    mechanism: str
    usable: bool
    missing: tuple[str, ...]
    chosen: bool  # the one an injector picks on this node when none is forced


def mechanism_support(capabilities: dict[str, bool]) -> list[MechanismSupport]:
    """For every registered injector and each of its mechanisms: can it run with ``capabilities``?"""
    rows: list[MechanismSupport] = []
    for name, cls in INJECTORS.items():
        picked = False
        for m in cls.mechanisms:
            missing = tuple(m.missing(capabilities))
            chosen = not missing and not picked
            picked = picked or chosen
            rows.append(MechanismSupport(name, m.name, not missing, missing, chosen))
    return rows
