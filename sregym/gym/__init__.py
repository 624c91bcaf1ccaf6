"""sregym as a Gymnasium environment: train on the incidents that are benchmarked (docs/training.md).

``import sregym.gym`` registers ``sregym/Incident-v0`` (the problem in ``reset(options={"problem":
ID})``) and ``sregym/<problem_id>-v0`` for each problem in the repository's catalog;
:func:`make_vector` plays several episodes of one problem side by side, in slot namespaces.
"""

from __future__ import annotations

import gymnasium

from sregym.gym.env import IncidentEnv
from sregym.gym.spaces import ToolAction, action_space, observation_space, parse_action
from sregym.gym.vector import make_vector

ENTRY_POINT = "sregym.gym.env:IncidentEnv"
GENERIC_ID = "sregym/Incident-v0"

__all__ = ["GENERIC_ID", "IncidentEnv", "ToolAction", "action_space", "env_id", "make_vector", "observation_space", "parse_action",
           "register_envs"]


def env_id(problem_id: str) -> str:
    return f"sregym/{problem_id}-v0"


def register_envs(problem_ids: list[str] | None = None) -> list[str]:
    """Register the generic env and one per problem (default: the repository's catalog); the ids."""
    if problem_ids is None:  # problem ids equal file names: nothing is parsed at import
        from sregym.core.loader import problem_dirs

        problem_ids = sorted({p.stem for d in problem_dirs() for p in d.glob("*.y*ml")})
    ids = []
    if GENERIC_ID not in gymnasium.registry:
        gymnasium.register(id=GENERIC_ID, entry_point=ENTRY_POINT)
    ids.append(GENERIC_ID)
    for pid in problem_ids:
        eid = env_id(pid)
        if eid not in gymnasium.registry:
            gymnasium.register(id=eid, entry_point=ENTRY_POINT, kwargs={"problem": pid})
        ids.append(eid)
    return ids


register_envs()
