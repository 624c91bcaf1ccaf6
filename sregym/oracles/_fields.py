"""Reading one field of a Kubernetes object and testing it against working values.

Paths are dotted, with list selectors, e.g.
``spec.template.spec.containers[name=geo].env[name=DATABASE_URL].value``,
``spec.ports[0].targetPort``, ``data["app.properties"]``, ``spec.selector.app``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sregym.core.errors import UserInputError

_SEGMENT = re.compile(r"""
    (?P<key>[A-Za-z0-9_\-/]+)            # a map key
  | \[(?P<index>-?\d+)\]                 # a list index
  | \[(?P<skey>[A-Za-z0-9_\-.]+)=(?P<sval>[^\]]*)\]   # a list item whose field equals a value
  | \["(?P<qkey>[^"]+)"\]                # a quoted map key (keys with dots)
  | \.
""", re.VERBOSE)

MISSING = object()


def parse_path(path: str) -> list[tuple[str, Any]]:
    """Split a path into steps: ("key", k), ("index", i) or ("match", (field, value))."""
    steps: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(path):
        m = _SEGMENT.match(path, pos)
        if not m or m.end() == pos:
            raise UserInputError(f"field path {path!r}: cannot read it at {path[pos:]!r}",
                                 hint='use dots and selectors, e.g. spec.template.spec.containers[name=app].image')
        if m.group("key") is not None:
            steps.append(("key", m.group("key")))
        elif m.group("index") is not None:
            steps.append(("index", int(m.group("index"))))
        elif m.group("skey") is not None:
            steps.append(("match", (m.group("skey"), m.group("sval").strip("'\""))))
        elif m.group("qkey") is not None:
            steps.append(("key", m.group("qkey")))
        pos = m.end()
    if not steps:
        raise UserInputError(f"field path {path!r} is empty")
    return steps


def lookup(obj: Any, path: str) -> Any:
    """The value at ``path`` in a decoded object, or ``MISSING``."""
    return lookup_steps(obj, parse_path(path))


def lookup_steps(obj: Any, steps: Sequence[tuple[str, Any]]) -> Any:
    """The value at already parsed ``steps`` (see ``parse_path``) in a decoded object, or ``MISSING``."""
    cur = obj
    for kind, arg in steps:
        if kind == "key":
            cur = cur.get(arg, MISSING) if isinstance(cur, dict) else MISSING
        elif kind == "index":
            cur = cur[arg] if isinstance(cur, list) and -len(cur) <= arg < len(cur) else MISSING
        else:
            key, value = arg
            cur = next((item for item in cur if isinstance(item, dict) and str(item.get(key)) == value),
                       MISSING) if isinstance(cur, list) else MISSING
        if cur is MISSING:
            return MISSING
    return cur


def same_value(a: Any, b: Any) -> bool:
    """Equal, treating ``8080`` and ``"8080"`` (and ``1`` and ``1.0``) as the same value."""
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


class Condition(BaseModel):
    """What a working value looks like. Give one or more tests; all must hold."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    equals: Any = None
    not_equals: Any = None
    in_: list[Any] | None = Field(None, alias="in", description="one of these working values")
    not_in: list[Any] | None = Field(None, description="none of these broken values")
    contains: str | None = None
    not_contains: str | None = None
    exists: bool | None = Field(None, description="the field must (true) or must not (false) be present")

    @model_validator(mode="after")
    def _some_test(self) -> Condition:
        if all(getattr(self, f) is None for f in ("equals", "not_equals", "in_", "not_in", "contains",
                                                   "not_contains", "exists")):
            raise ValueError("give at least one of equals, not_equals, in, not_in, contains, not_contains, exists")
        return self

    def holds(self, value: Any) -> tuple[bool, str]:
        """Whether ``value`` (``MISSING`` when absent) is a working value, and why not."""
        present = value is not MISSING
        if self.exists is not None and present != self.exists:
            return False, "present" if present else "absent"
        if not present:
            if self.exists is None and (self.equals is not None or self.in_ is not None or self.contains is not None):
                return False, "absent"
            return True, ""
        if self.equals is not None and not same_value(value, self.equals):
            return False, "differs from the working value"
        if self.not_equals is not None and same_value(value, self.not_equals):
            return False, "equals the broken value"
        if self.in_ is not None and not any(same_value(value, v) for v in self.in_):
            return False, "not one of the working values"
        if self.not_in is not None and any(same_value(value, v) for v in self.not_in):
            return False, "is one of the broken values"
        if self.contains is not None and self.contains not in str(value):
            return False, "lacks the required text"
        if self.not_contains is not None and self.not_contains in str(value):
            return False, "contains the broken text"
        return True, ""
