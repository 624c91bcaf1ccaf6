"""What a policy can reach from an object by following attributes, items and closures: the
attack a test makes on an env (``reachable(env)`` must hold no ground truth)."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

# Ways out of the env that are the interpreter's, not the env's (any object reaches every module
# through them); what the env itself holds is followed.
SKIP_TYPES = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.FrameType,
              types.CodeType)


def reachable(root: Any, limit: int = 200_000) -> Iterator[Any]:
    """Every object reachable from ``root`` through ``__dict__``, slots, containers and bound methods."""
    seen: set[int] = set()
    stack = [root]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, SKIP_TYPES):
            continue
        seen.add(id(obj))
        yield obj
        if isinstance(obj, (str, bytes, int, float, bool, type(None))):
            continue
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, types.MethodType):
            stack.append(obj.__self__)
        else:
            stack.extend(getattr(obj, "__dict__", {}).values())
            for slot in getattr(type(obj), "__slots__", ()) or ():
                if isinstance(slot, str) and hasattr(obj, slot):
                    stack.append(getattr(obj, slot))
