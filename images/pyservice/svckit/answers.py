"""What a working app answers: the load generator's checks of an answer's content.

A 200 is not enough: a stand-in anywhere on the request path (a stub behind the entry Service, or
behind a broken dependency's, answering an empty or fixed body fast) made every request a fast
success while the app stayed as broken as before. So each request of a workload may carry a check
that knows its parameters (the product asked for, the point searched around) and says why an
answer is not what the app gives to it. Pure functions: no I/O, no metrics.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# why an answer (status, body) is not what a working app gives to this request, or None
Check = Callable[[int, bytes], "str | None"]


def json_object(body: bytes) -> dict[str, Any]:
    """The answer's JSON object; raises ValueError for anything else (see :func:`wrong_answer`)."""
    value = json.loads(body)
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not an object")
    return value


def wrong_answer(check: Check | None, status: int, body: bytes) -> str | None:
    """Why an answer with an expected status is still not a working app's, or None."""
    if check is None:
        return None
    try:
        return check(status, body)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # not the shape the app answers in
        return f"unreadable answer ({type(e).__name__}: {str(e)[:80]})"
