"""Parameters of plug-ins (fault primitives, oracles): the one empty model and the one way a bad
parameter is reported (the field, what was wrong, whose parameter it is)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from sregym.core.errors import UserInputError

M = TypeVar("M", bound=BaseModel)


class NoParams(BaseModel):
    """The parameters of a plug-in that takes none (any given is an error)."""

    model_config = ConfigDict(extra="forbid")


def dotted_loc(loc: Sequence[str | int]) -> str:
    """``('faults', 0, 'params', 'x')`` -> ``faults.0.params.x``; the empty path is ``(root)``."""
    return ".".join(str(x) for x in loc) or "(root)"


def first_error(e: ValidationError) -> str:
    """``field.path: message`` of the first validation error (one clear message, not a dump)."""
    first = e.errors()[0]
    return f"{dotted_loc(first['loc'])}: {first['msg']}"


def explain_param_error(e: ValidationError, model: type[BaseModel], owner: str) -> tuple[tuple, str]:
    """Where the first error of a plug-in's parameters is (relative to its ``params``) and what to
    tell the user: an unknown parameter lists those the plug-in takes; a missing one says so."""
    first = e.errors()[0]
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = f"unknown parameter of {owner} (it takes: {', '.join(model.model_fields) or 'none'})"
    elif first["type"] == "missing":
        msg = f"required parameter of {owner} is missing"
    return tuple(first["loc"]), msg


def validate_params(model: type[M], raw: dict[str, Any] | None, *, where: str, owner: str,
                    hint: str | None = None) -> M:
    """Validate a plug-in's raw parameters; the error names the field, what was wrong and whose
    parameter it is (``faults.0.params.delay: ... (injector 'network_latency')``)."""
    try:
        return model.model_validate(raw or {})
    except ValidationError as e:
        loc, msg = explain_param_error(e, model, owner)
        raise UserInputError(f"{where}.{dotted_loc(loc)}: {msg} ({owner})", hint=hint) from None
