"""Oracle settings kept as YAML data (the checklist, the reward weights) and their validation."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from sregym.core.errors import UserInputError
from sregym.core.params import first_error

M = TypeVar("M", bound=BaseModel)


def builtin_file(name: str) -> Path:
    """A data file shipped with the built-in ``oracles`` package (``checklist.yaml``, ``reward.yaml``)."""
    return Path(str(files("oracles") / name))


def load_model_file(path: Path, model: type[M], what: str) -> M:
    """Read YAML at ``path`` into ``model``; every error names the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserInputError(f"{path}: {what} file not found") from None
    except yaml.YAMLError as e:
        raise UserInputError(f"{path}: not valid YAML: {e}") from None
    try:
        return model.model_validate(raw or {})
    except ValidationError as e:
        raise UserInputError(f"{path}: {first_error(e)}") from None
