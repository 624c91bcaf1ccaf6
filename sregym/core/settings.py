"""How a run is played, as one typed object: the agent and its options, seed, noise, budgets,
windows, timeouts and plug-ins.

The ``sregym run`` and ``sregym suite run`` options build it (``sregym.cli.options``), ``sregym run
--settings FILE`` reads it from YAML or JSON (its JSON Schema: ``sregym schema``), the suite runner
holds one per cell, and the run record stores the one its run was played with. (The agent plane
reads run records, so this module imports nothing that could reach a problem.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RunSettings(BaseModel):
    """The settings of one run (a problem is played with them; they never change the problem)."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field("noop", description="agent name: noop, random, react, command, oracle, ...")
    agent_options: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of the agent, e.g. model and base_url (react), "
                                          "image, egress, host and run_as (command)")
    seed: int = Field(0, description="run seed: the same seed gives the same timeline and noise")
    noise: bool = Field(True, description="seeded transient noise during the run")
    budget_steps: int | None = Field(None, ge=1, description="max tool calls (default: the problem's)")
    budget_seconds: float | None = Field(None, ge=1, description="agent wall time (default: the problem's)")
    budget_tokens: int | None = Field(None, ge=1, description="max model tokens, for LLM agents (default: the "
                                                               "problem's)")
    baseline_window: float = Field(30.0, gt=0, description="seconds of SLO baseline before injection")
    grade_window: float = Field(60.0, gt=0, description="seconds each mitigation oracle watches")
    grade_settle: float = Field(0.0, ge=0, le=600, description=(
        "seconds between the agent's submission and the mitigation grade: the time a fix takes to reach "
        "users (a client's reconnect back-off after an outage); 0 grades at once, as a user would see it"))
    verify_timeout: float = Field(90.0, gt=0, description="seconds a fault has to take effect")
    plugins: list[Path] = Field(default_factory=list, description="folders of Python modules imported first "
                                                                  "(your own injectors, oracles, agents)")
    charts_dirs: list[Path] = Field(default_factory=list, description="extra folders of app charts")

    def over(self, base: RunSettings) -> RunSettings:
        """These settings over ``base``: what these set wins, the rest comes from ``base`` (an agent's
        options are merged, key by key)."""
        mine, theirs = self.model_dump(exclude_unset=True), base.model_dump(exclude_unset=True)
        if "agent_options" in mine and "agent_options" in theirs:
            mine["agent_options"] = theirs["agent_options"] | mine["agent_options"]
        return RunSettings.model_validate(theirs | mine)
