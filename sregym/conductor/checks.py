"""Static checks of a problem against the plug-in registries (no cluster needed).

The loader validates the schema; this module checks what only the registries know: that each
fault names a registered injector with valid parameters, a target kind it acts on and a mechanism
it has, that each oracle exists with valid parameters, and that each noise type has an injector.
Every error points at the file, line and field, like a schema error.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

from sregym.core.errors import UnknownNameError
from sregym.core.loader import LoadedProblem, SourceMap
from sregym.injectors import INJECTORS
from sregym.oracles import MITIGATION_ORACLES
from sregym.oracles.diagnosis import DIAGNOSIS_ORACLES

NOISE_PREFIX = "noise_"


def noise_injector_name(noise_type: str) -> str:
    """Noise type ``pod_restart`` is served by the injector registered as ``noise_pod_restart``."""
    return f"{NOISE_PREFIX}{noise_type}"


def _params(source: SourceMap, loc: tuple, model: type[BaseModel], raw: dict[str, Any], owner: str) -> BaseModel:
    try:
        return model.model_validate(raw or {})
    except ValidationError as e:
        first = e.errors()[0]
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = f"unknown parameter of {owner} (it takes: {', '.join(model.model_fields) or 'none'})"
        elif first["type"] == "missing":
            msg = f"required parameter of {owner} is missing"
        raise source.error((*loc, *first["loc"]), msg) from None


def _lookup(registry: Any, name: str, source: SourceMap, loc: tuple) -> Any:
    try:
        return registry.get(name)
    except UnknownNameError as e:
        raise source.error(loc, e.message, hint=e.hint) from None


def check_problem(lp: LoadedProblem, *, noise: bool = True) -> None:
    """Raise ``ProblemFileError`` at the first reference the registries do not accept.

    ``noise=False`` skips the noise types (a run with ``--noise off`` does not need them).
    """
    p, src = lp.problem, lp.source
    for word in (p.id, *(f.injector for f in p.faults)):
        if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", p.alert, re.IGNORECASE):
            raise src.error(("alert",), f"the alert names {word!r}, which gives the fault away",
                            hint="describe the symptom as an on-call SRE would get it")
    for i, fault in enumerate(p.faults):
        cls = _lookup(INJECTORS, fault.injector, src, ("faults", i, "injector"))
        _params(src, ("faults", i, "params"), cls.Params, fault.params, f"injector {fault.injector!r}")
        if cls.targets and fault.target.kind and fault.target.kind not in cls.targets:
            raise src.error(("faults", i, "target", "kind"),
                            f"injector {fault.injector!r} acts on {', '.join(cls.targets)}, not {fault.target.kind}")
        if cls.node_level is False and fault.target.kind == "Node":
            raise src.error(("faults", i, "target", "kind"), f"injector {fault.injector!r} is not a node-level fault")
        names = [m.name for m in cls.mechanisms]
        if fault.mechanism is not None and fault.mechanism not in names:
            raise src.error(("faults", i, "mechanism"),
                            f"injector {fault.injector!r} has no mechanism {fault.mechanism!r} "
                            f"(it has: {', '.join(names)})")
    for j, ref in enumerate(p.oracles.mitigation):
        cls = _lookup(MITIGATION_ORACLES, ref.name, src, ("oracles", "mitigation", j, "name"))
        _params(src, ("oracles", "mitigation", j, "params"), cls.Params, ref.params, f"oracle {ref.name!r}")
    _lookup(DIAGNOSIS_ORACLES, p.oracles.diagnosis.name, src, ("oracles", "diagnosis", "name"))
    if noise and p.noise.per_window > 0:
        for k, noise_type in enumerate(p.noise.types):
            if noise_injector_name(noise_type) not in INJECTORS:
                known = [n.removeprefix(NOISE_PREFIX) for n in INJECTORS.names() if n.startswith(NOISE_PREFIX)]
                raise src.error(("noise", "types", k),
                                f"unknown noise type {noise_type!r} (no injector {noise_injector_name(noise_type)!r})",
                                hint=f"known noise types: {', '.join(known)}" if known
                                else "no noise injectors are registered; use --noise off or noise: {per_window: 0}")
