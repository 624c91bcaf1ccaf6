"""The env's spaces and the pure translation between them and tool calls.

An action is one tool call, ``{"tool": "kubectl", "arguments": '{"command": "get pods -n tiny"}'}``:
the tool's name and its arguments as a JSON object in a string, as chat models emit tool calls. An
observation is ``{"text": ..., "tool": ..., "error": 0 | 1, "structured": ...}``: the task prompt at
reset (``tool`` empty), then each call's result as a model would read it, with the tool's structured
fields as JSON text. Both are ``Dict`` spaces of ``Text`` (and one ``Discrete``), so
``gymnasium.utils.env_checker.check_env`` can sample and check them.

Text spaces have a fixed character set: observations are kept to printable ASCII and whitespace,
anything else written as a Python escape (``\\u2026``), which loses nothing a model needs.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass, field
from typing import Any

from gymnasium import spaces

TOOL_NAME_CHARS = string.ascii_letters + string.digits + "_-"
TEXT_CHARS = string.printable  # ASCII letters, digits, punctuation, space, \t \n \r \x0b \x0c
MAX_TOOL_NAME = 64
MAX_ARGUMENTS = 32_000  # a manifest in kubectl's stdin fits (the server allows 20000 characters)
MAX_TEXT = 64_000  # the server cuts a tool's output at 16000 characters; escapes may lengthen it
TRUNCATED = "\n[cut by the env: the observation is limited to %d characters]"


def action_space() -> spaces.Dict:
    return spaces.Dict({
        "tool": spaces.Text(min_length=1, max_length=MAX_TOOL_NAME, charset=TOOL_NAME_CHARS),
        "arguments": spaces.Text(min_length=0, max_length=MAX_ARGUMENTS, charset=TEXT_CHARS),
    })


def observation_space() -> spaces.Dict:
    return spaces.Dict({
        "text": spaces.Text(min_length=0, max_length=MAX_TEXT, charset=TEXT_CHARS),
        "tool": spaces.Text(min_length=0, max_length=MAX_TOOL_NAME, charset=TOOL_NAME_CHARS),
        "error": spaces.Discrete(2),
        "structured": spaces.Text(min_length=0, max_length=MAX_TEXT, charset=TEXT_CHARS),
    })


def as_space_text(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` in the Text space's characters: non-ASCII escaped, cut to ``limit``."""
    out = "".join(c if c in TEXT_CHARS else c.encode("unicode_escape").decode("ascii") for c in text)
    if len(out) > limit:
        note = TRUNCATED % limit
        out = out[: limit - len(note)] + note
    return out


@dataclass(frozen=True)
class ToolAction:
    """One parsed action. ``error`` says why it cannot be sent to the tool server (then it is an
    invalid action the env answers itself); ``tokens`` are the model tokens the policy spent on it."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    tokens: int = 0


def parse_action(action: Any) -> ToolAction:
    """A ``ToolAction`` from whatever the policy passed; never raises.

    Accepted: the action space's dict (``arguments`` a JSON object in a string, or an empty string
    for no arguments); ``arguments`` as a dict is taken too. An optional ``tokens`` key (an int)
    counts the model tokens spent toward the token budget."""
    if not isinstance(action, dict):
        return ToolAction(tool="", error=f"an action is a dict with 'tool' and 'arguments', not {type(action).__name__}")
    tool = action.get("tool")
    tokens = action.get("tokens", 0)
    tokens = int(tokens) if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else 0
    if not isinstance(tool, str) or not tool.strip():
        return ToolAction(tool="", error="the action names no tool ('tool' must be a tool's name)", tokens=tokens)
    tool = tool.strip()
    raw = action.get("arguments", "")
    if isinstance(raw, dict):
        return ToolAction(tool=tool, arguments=raw, tokens=tokens)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ToolAction(tool=tool, tokens=tokens)
    if not isinstance(raw, str):
        return ToolAction(tool=tool, error="'arguments' must be a JSON object in a string", tokens=tokens)
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        return ToolAction(tool=tool, error=f"the arguments are not JSON ({e.msg} at character {e.pos}); "
                                           "send a JSON object", tokens=tokens)
    if not isinstance(parsed, dict):
        return ToolAction(tool=tool, error=f"the arguments must be a JSON object, not {type(parsed).__name__}",
                          tokens=tokens)
    return ToolAction(tool=tool, arguments=parsed, tokens=tokens)


def observation(text: str, *, tool: str = "", error: bool = False, structured: Any = None) -> dict[str, Any]:
    """One observation in the observation space."""
    fields = "" if structured is None else json.dumps(structured, sort_keys=True, default=str)
    name = "".join(c for c in tool if c in TOOL_NAME_CHARS)[:MAX_TOOL_NAME]
    return {"text": as_space_text(text), "tool": name, "error": int(bool(error)), "structured": as_space_text(fields)}


def refusal_text(action: ToolAction) -> str:
    """What the policy reads for an action the env could not send (as the react agent words it)."""
    return f"error: your call to {action.tool or '(no tool)'} was not executed: {action.error}"
