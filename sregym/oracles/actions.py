"""What the agent looked at and what it changed, read from the trajectory's tool calls.

``evidence_coverage``: the share of the ground truth's evidence entries (``logs:geo``,
``config:deployment/geo``, ``metrics:postgres``, ``traces:frontend``) that some tool call
gathered. ``wrong_remediations``: write actions (kubectl apply, patch, edit, delete, scale,
rollout, set, label, annotate, ...) aimed at components outside the ground truth's component and
scope. Pure functions of the trajectory; nothing here touches the cluster.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from sregym.core.problem import GroundTruth
from sregym.core.trajectory import ToolCall, Trajectory
from sregym.oracles.names import KIND_WORDS, mentions, normalise, related

WRITE_VERBS = frozenset({"apply", "patch", "edit", "delete", "scale", "rollout", "set", "label", "annotate",
                         "create", "replace", "autoscale", "taint", "cordon", "uncordon", "drain", "expose"})
# Sub-commands that take no object name themselves (``rollout restart deploy/x``, ``set env ...``).
_SUBVERBS = frozenset({"restart", "undo", "pause", "resume", "status", "history", "env", "image", "resources",
                       "selector", "serviceaccount", "subject"})
# kubectl flags whose next argument is a value, not an object name.
_VALUE_FLAGS = frozenset({"-n", "--namespace", "-l", "--selector", "-f", "--filename", "-o", "--output", "-c",
                          "--container", "--context", "--type", "-p", "--patch", "--replicas", "--kubeconfig",
                          "--field-selector", "--grace-period", "--timeout", "--to-revision", "--image", "-e",
                          "--env", "--port", "--target-port", "--cpu-percent", "--min", "--max", "--field-manager"})

# Which evidence kind a tool call gathers: by the MCP tool's name or by the kubectl verb.
_KIND_BY_TOOL_WORD = {"log": "logs", "metric": "metrics", "prom": "metrics", "trace": "traces", "span": "traces",
                      "jaeger": "traces", "event": "events", "config": "config", "describe": "config"}
_MANIFEST_NAME = re.compile(r"^\s*name:\s*[\"']?([A-Za-z0-9][A-Za-z0-9._-]*)", re.MULTILINE)
_KIND_BY_VERB = {"logs": "logs", "top": "metrics", "get": "config", "describe": "config", "explain": "config"}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [] if value is None else [str(value)]


def argv(call: ToolCall) -> list[str]:
    """The kubectl argument vector of a call, whether given as a list or one command string."""
    for key in ("args", "argv"):
        raw = call.arguments.get(key)
        if isinstance(raw, list):
            return [str(a) for a in raw]
    raw = call.arguments.get("command") or call.arguments.get("cmd")
    if isinstance(raw, list):
        words = [str(a) for a in raw]
    elif isinstance(raw, str):
        try:
            words = shlex.split(raw)
        except ValueError:
            words = raw.split()
    else:
        words = []
    return words[1:] if words and words[0] == "kubectl" else words


def verb(call: ToolCall) -> str | None:
    """The kubectl verb: recorded on the call, else the first word that is not a flag."""
    if call.verb:
        return call.verb.lower()
    if "kubectl" not in call.tool.lower():
        return None
    skip = False
    for word in argv(call):
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            skip = word in _VALUE_FLAGS
            continue
        return word.lower()
    return None


def evidence_kinds(call: ToolCall) -> set[str]:
    """What kinds of evidence one call gathers (``logs``, ``metrics``, ``traces``, ``config``, ...)."""
    if call.invalid or call.error:
        return set()
    kinds = {kind for word, kind in _KIND_BY_TOOL_WORD.items() if word in call.tool.lower()}
    v = verb(call)
    if v in _KIND_BY_VERB:
        kinds.add(_KIND_BY_VERB[v])
        if v == "get" and any("event" in a.lower() for a in argv(call)):
            kinds.add("events")
    return kinds


def _split_entry(entry: str) -> tuple[str | None, str]:
    kind, sep, target = entry.partition(":")
    return (kind.strip().lower(), target.strip()) if sep else (None, entry.strip())


def gathered(call: ToolCall, entry: str) -> bool:
    """Whether ``call`` gathers one evidence entry ``kind:target`` (or a bare ``target``)."""
    kind, target = _split_entry(entry)
    if kind is not None and kind not in evidence_kinds(call):
        return False
    if kind is None and (call.invalid or call.error):
        return False
    return mentions(" ".join(_strings(call.arguments)), target)


def evidence_coverage(trajectory: Trajectory, ground_truth: GroundTruth) -> float:
    """Share of ``ground_truth.evidence`` entries some successful tool call gathered (1.0 if none are listed)."""
    entries = ground_truth.evidence
    if not entries:
        return 1.0
    hit = sum(any(gathered(c, e) for c in trajectory.tool_calls) for e in entries)
    return hit / len(entries)


def write_targets(call: ToolCall) -> list[str]:
    """Object names a write call acts on; ``*`` when it acts on everything of a kind (``--all``, no name)."""
    words = argv(call)
    names: list[str] = []
    selectors: list[str] = []
    positional: list[str] = []
    skip_for: str | None = None
    for word in words:
        if skip_for is not None:
            if skip_for in ("-l", "--selector"):
                selectors.append(word)
            skip_for = None
            continue
        if word.startswith("-"):
            flag, _, value = word.partition("=")
            if flag in ("-l", "--selector"):
                if value:
                    selectors.append(value)
                else:
                    skip_for = flag
            elif flag in _VALUE_FLAGS and not value:
                skip_for = flag
            continue
        positional.append(word)
    rest = positional[1:]  # drop the verb
    if rest and rest[0].lower() in _SUBVERBS:
        rest = rest[1:]
    manifest = any(w in ("-f", "--filename") or w.startswith(("-f=", "--filename=")) for w in words)
    saw_type = False
    for word in rest:
        low = word.lower()
        if "=" in word or (low.endswith("-") and not low.startswith("-")):
            continue  # KEY=value assignments and label removals
        if "/" in word:
            names.extend(normalise(part) for part in word.split(","))
        elif not saw_type and all(p in KIND_WORDS or "." in p for p in low.split(",")):
            saw_type = True
        else:
            names.append(normalise(word))
    for sel in selectors:
        names.extend(v for _, _, v in (pair.partition("=") for pair in sel.split(",")) if v)
    if manifest and not names:
        # kubectl apply -f: the objects are named in the manifest text the call carried, if any.
        text = "\n".join(s for k, v in call.arguments.items() if k not in ("args", "argv", "command", "cmd")
                         for s in _strings(v))
        names.extend(normalise(n) for n in _MANIFEST_NAME.findall(text))
    return names or ["*"]


def is_write(call: ToolCall) -> bool:
    v = verb(call)
    if "kubectl" in call.tool.lower() or call.verb:
        if v == "rollout" and any(w in ("status", "history") for w in argv(call)):
            return False
        return v in WRITE_VERBS
    # submitting a diagnosis or "mitigation done" changes nothing in the cluster
    return not call.read_only and not call.tool.lower().startswith("submit")


def wrong_remediations(trajectory: Trajectory, ground_truth: GroundTruth) -> list[str]:
    """Write actions on components outside the ground truth's component and scope, one line each.

    Lenient on purpose (a penalty must not hit a right fix): an object named after an allowed
    component (``geo-config`` for ``geo``) or named in the ground truth's details (the
    NetworkPolicy or quota the fault planted) is not a wrong remediation.
    """
    allowed = [ground_truth.component, *ground_truth.scope]
    named = {normalise(t) for d in ground_truth.details for t in d.replace(",", " ").split()}

    def ok(target: str) -> bool:
        return target in named or any(related(target, a) for a in allowed)

    wrong: list[str] = []
    for call in trajectory.tool_calls:
        if call.invalid or call.error or not is_write(call):
            continue
        if "kubectl" in call.tool.lower() or call.verb:
            targets = write_targets(call)
            if targets != ["*"] and any(w in ("-f", "--filename") or w.startswith("--filename=") for w in argv(call)):
                # a manifest names its containers too: it is right if it is about an allowed component
                targets = [] if any(ok(t) for t in targets) else targets
            bad = [t for t in targets if t == "*" or not ok(t)]
        else:  # another write tool: right when its arguments name an allowed component
            bad = [] if any(mentions(s, a) for s in _strings(call.arguments) for a in allowed) else ["*"]
        if bad:
            what = " ".join(argv(call)) or " ".join(_strings(call.arguments))
            wrong.append(f"t={call.t:.1f}s {call.tool} {what}".strip() + f" (touches {', '.join(sorted(set(bad)))})")
    return wrong
