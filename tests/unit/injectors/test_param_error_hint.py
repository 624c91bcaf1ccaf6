"""A parameter error of a primitive points at where its parameters are declared (a command the
hint once named does not exist)."""

from __future__ import annotations

import pytest

from sregym.core.errors import UserInputError
from sregym.injectors import INJECTORS


def test_a_bad_parameter_names_the_params_class_and_module_of_the_primitive():
    with pytest.raises(UserInputError) as err:
        INJECTORS.get("env_var").parse_params({})
    assert "EnvVar.Params in injectors.env_var" in (err.value.hint or "")
    assert "show-injector" not in (err.value.hint or "")
