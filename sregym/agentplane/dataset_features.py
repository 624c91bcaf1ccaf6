"""One schema for every split of an exported dataset, in the Hugging Face dataset card's terms.

``datasets.load_dataset(<folder>)`` reads all splits as one dataset with one set of features; left
to infer them, it takes them from one split's rows, and a column that is null there (``model`` of
runs without a model, a reward term a run did not measure) then refuses another split's values
("Couldn't cast array of type string to null"). The card therefore declares the features, merged
over the rows of all splits: a struct has every key any row gave it, an int column that also holds
floats is float64, a column that is null in every row is a string. Written as the card's
``dataset_info.features`` YAML (the form ``datasets.Features._to_yaml_list`` writes).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# a kind: None (only nulls seen), a dtype string, ("list", kind) or ("struct", {key: kind})
Kind = Any
_NUMBERS = ("int64", "float64")


class UnrepresentableColumn(ValueError):
    """Two rows give one field values of kinds no Arrow type holds both (a string and a struct, say)."""


def _kind(value: Any) -> Kind:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        element: Kind = None
        for item in value:
            element = _merge(element, _kind(item), "[]")
        return ("list", element)
    if isinstance(value, dict):
        return ("struct", {str(k): _kind(v) for k, v in value.items()})
    raise UnrepresentableColumn(f"a value of type {type(value).__name__} has no dataset feature")


def _merge(a: Kind, b: Kind, path: str) -> Kind:
    if a is None or a == b:
        return b
    if b is None:
        return a
    if a in _NUMBERS and b in _NUMBERS:  # JSON writes 1.0 as 1.0, but a float field may hold ints
        return "float64"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "list":
        return ("list", _merge(a[1], b[1], f"{path}[]"))
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "struct":
        fields = dict(a[1])
        for key, kind in b[1].items():
            fields[key] = _merge(fields.get(key), kind, f"{path}.{key}")
        return ("struct", fields)
    raise UnrepresentableColumn(f"field {path} holds both {_name(a)} and {_name(b)} values")


def _name(kind: Kind) -> str:
    return kind if isinstance(kind, str) else kind[0]


def row_kind(rows: Iterable[dict[str, Any]]) -> Kind:
    """The struct kind that holds every row."""
    merged: Kind = ("struct", {})
    for row in rows:
        merged = _merge(merged, _kind(row), "row")
    return merged


def _inner(kind: Kind) -> Any:
    """A list's element as the card writes it: a dtype, a list of fields, or a nested ``{list: ...}``."""
    if kind is None or isinstance(kind, str):
        return kind or "string"
    if kind[0] == "list":
        return {"list": _inner(kind[1])}
    return _fields(kind[1])


def _fields(fields: dict[str, Kind]) -> list[dict[str, Any]]:
    out = []
    for name, kind in fields.items():
        if kind is None or isinstance(kind, str):
            out.append({"name": name, "dtype": kind or "string"})
        elif kind[0] == "list":
            out.append({"name": name, "list": _inner(kind[1])})
        else:
            out.append({"name": name, "struct": _fields(kind[1])})
    return out


def card_features(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``dataset_info.features`` for a card over ``rows`` (all splits together)."""
    return _fields(row_kind(rows)[1])
