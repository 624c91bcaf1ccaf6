"""Episodes side by side: a Gymnasium vector env whose sub-envs play one problem in slot namespaces.

Sub-env ``k`` plays the problem's app in ``<namespace>-p<k>`` (``k`` = 0 keeps the problem's own
namespace), the names a suite's parallel cells use, so two episodes of one app never share a
release. Only problems whose runs can overlap on one cluster are accepted: a node-level fault, or
node-level noise when noise is on, holds a node, and two episodes holding nodes would grade each
other's trouble (``sregym.conductor.suite.claims`` decides, as it does for a suite's cells).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import gymnasium

from sregym.conductor.suite import claims, conflict, default_node_level, problem_namespace
from sregym.core.errors import UserInputError
from sregym.core.loader import load_problem_arg
from sregym.core.settings import RunSettings
from sregym.gym.env import IncidentEnv


def slot_namespaces(base: str, num_envs: int) -> list[str]:
    """The namespace of each sub-env: the problem's own, then ``<base>-p1`` ... (as a suite's slots)."""
    return [base, *(f"{base}-p{k}" for k in range(1, num_envs))]


def make_vector(problem: str, num_envs: int = 2, *, settings: RunSettings | dict[str, Any] | None = None,
                problems_dirs: Sequence[Path | str] = (), out_dir: Path | str = "runs",
                kubeconfig: Path | str | None = None, context: str | None = None, shaping: Sequence[str] = (),
                mode: Literal["async", "sync"] = "async") -> gymnasium.vector.VectorEnv:
    """``num_envs`` episodes of ``problem`` at once, each in its own slot namespace.

    ``mode="async"`` runs each sub-env in its own process (the episodes' waits overlap); ``"sync"``
    steps them one after another in this process. Refused, before anything runs, when the problem's
    runs cannot overlap on one cluster."""
    if num_envs < 1:
        raise UserInputError(f"num_envs must be at least 1 (got {num_envs})")
    loaded = load_problem_arg(problem, [Path(p) for p in problems_dirs])
    base_settings = settings if isinstance(settings, RunSettings) else RunSettings.model_validate(settings or {})
    names = slot_namespaces(problem_namespace(loaded.problem), num_envs)
    held = [claims(loaded.problem, ns, default_node_level, noise=base_settings.noise) for ns in names]
    if num_envs > 1 and conflict(held[0], held[1]):
        nodes = sorted(c for c in held[0] if c.startswith("node:"))
        raise UserInputError(
            f"problem {loaded.problem.id}: its runs hold {', '.join(nodes)} (a node-level fault, or node-level "
            "noise with noise on), so two episodes on one cluster would overlap on a node",
            hint="use num_envs=1, or settings={'noise': False} when only the noise is node-level")

    def factory(namespace: str):
        return lambda: IncidentEnv(problem, settings=base_settings, out_dir=out_dir, problems_dirs=problems_dirs,
                                   kubeconfig=kubeconfig, context=context, shaping=shaping, namespace=namespace)

    fns = [factory(ns) for ns in names]
    if mode == "sync":
        return gymnasium.vector.SyncVectorEnv(fns)
    return gymnasium.vector.AsyncVectorEnv(fns, shared_memory=False)
