"""What the agent looked at and what it changed, read from the trajectory's tool calls.

``evidence_coverage``: the share of the ground truth's evidence entries (``logs:geo``,
``config:deployment/geo``, ``metrics:postgres``, ``traces:frontend``) that some tool call
gathered. ``wrong_remediations``: write actions (kubectl apply, patch, delete, scale, rollout,
set, label, annotate, ...) aimed at components outside the ground truth's component and scope.
Pure functions of the trajectory; nothing here touches the cluster.

A kubectl call is read with the grammar the tool server used to accept and run it
(:mod:`sregym.oracles._kubectl_objects`), from the two arguments the server reads (``command`` and
``stdin``), so what the grader judges is what ran.
"""

from __future__ import annotations

from typing import Any

from sregym.core.problem import GroundTruth
from sregym.core.trajectory import ToolCall, Trajectory
from sregym.oracles._kubectl_objects import (INVESTIGATION, Reach, acted_on, changes_something, read_call,
                                            read_objects, reads_events)
from sregym.oracles._names import mentions, normalise, related, same_component

KUBECTL = "kubectl"  # the tool server's kubectl tool

# Which evidence kind a tool call gathers: by the MCP tool's name or by the kubectl command.
_KIND_BY_TOOL_WORD = {"log": "logs", "metric": "metrics", "prom": "metrics", "trace": "traces", "span": "traces",
                      "jaeger": "traces", "event": "events", "config": "config", "describe": "config"}
_KIND_BY_VERB = {"logs": "logs", "top": "metrics", "get": "config", "describe": "config", "explain": "config",
                 "events": "events"}
# The arguments of the server's own tools that say whose data they return (a `text` filter does not).
_SUBJECT_ARGUMENTS = {"query_logs": ("pod", "container"), "query_traces": ("service",)}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [] if value is None else [str(value)]


def _command_text(call: ToolCall) -> str:
    command = call.arguments.get("command")
    return " ".join(_strings(command))


def verb(call: ToolCall) -> str | None:
    """The kubectl verb of a call: by the shared grammar, else as the server recorded it."""
    if call.tool != KUBECTL:
        return None
    read = read_call(call)
    return read[0].verb if read else (call.verb.lower() if call.verb else None)


def evidence_kinds(call: ToolCall) -> set[str]:
    """What kinds of evidence one call gathers (``logs``, ``metrics``, ``traces``, ``config``, ...)."""
    if call.invalid or call.error:
        return set()
    if call.tool == KUBECTL:
        read = read_call(call)
        if read is None:
            return set()
        kc = read[0]
        kinds = {_KIND_BY_VERB[kc.verb]} if kc.verb in _KIND_BY_VERB else set()
        return kinds | ({"events"} if reads_events(kc) else set())
    return {kind for word, kind in _KIND_BY_TOOL_WORD.items() if word in call.tool.lower()}


def _split_entry(entry: str) -> tuple[str | None, str]:
    kind, sep, target = entry.partition(":")
    return (kind.strip().lower(), target.strip()) if sep else (None, entry.strip())


def _names_subject(call: ToolCall, target: str) -> bool:
    """Whether a successful call's data is about ``target``: the objects a kubectl read named, the
    pod, container or service a query tool was asked for, any word of another tool's arguments."""
    if call.tool == KUBECTL:
        read = read_call(call)
        if read is None:
            return False
        reach = read_objects(*read)
        return any(same_component(n, target) for n in [*reach.names, *(v for vs in reach.selected for v in vs)])
    fields = _SUBJECT_ARGUMENTS.get(call.tool)
    texts = _strings([call.arguments.get(f) for f in fields]) if fields else _strings(call.arguments)
    return any(mentions(text, target) for text in texts)


def gathered(call: ToolCall, entry: str) -> bool:
    """Whether ``call`` gathers one evidence entry ``kind:target`` (or a bare ``target``)."""
    if call.invalid or call.error:
        return False
    kind, target = _split_entry(entry)
    if kind is not None and kind not in evidence_kinds(call):
        return False
    return _names_subject(call, target)


def evidence_coverage(trajectory: Trajectory, ground_truth: GroundTruth) -> float:
    """Share of ``ground_truth.evidence`` entries some successful tool call gathered (1.0 if none are listed)."""
    entries = ground_truth.evidence
    if not entries:
        return 1.0
    hit = sum(any(gathered(c, e) for c in trajectory.tool_calls) for e in entries)
    return hit / len(entries)


def _write_reach(call: ToolCall) -> Reach:
    read = read_call(call)
    if read is None:  # ran (the server read it) but unreadable now, e.g. an old record cut short
        return Reach(everything=True)
    return acted_on(*read)


def write_targets(call: ToolCall) -> list[str]:
    """Object names a write call acts on, normalised; ``*`` when it acts on everything of a kind
    (``--all``, a lone type, a selector that narrows nothing). Selector values stand for the objects
    they select; an empty list means the call names nothing kubectl would act on."""
    reach = _write_reach(call)
    if reach.everything:
        return ["*"]
    return sorted({normalise(n) for n in [*reach.names, *(v for vs in reach.selected for v in vs)]})


def is_write(call: ToolCall) -> bool:
    """Whether a call that ran may have changed the cluster (kubectl: a write command, not a dry run)."""
    if call.tool == KUBECTL:
        read = read_call(call)
        if read is None:  # the server's own class of the call it ran
            return not call.read_only and (call.verb or "") not in INVESTIGATION
        return changes_something(read[0])
    # submitting a diagnosis or "mitigation done" changes nothing in the cluster
    return not call.read_only and not call.tool.lower().startswith("submit")


def wrong_remediations(trajectory: Trajectory, ground_truth: GroundTruth) -> list[str]:
    """Write actions on components outside the ground truth's component and scope, one line each.

    Lenient on purpose (a penalty must not hit a right fix): an object named after an allowed
    component (``geo-config`` for ``geo``) or named in the ground truth's details (the
    NetworkPolicy or quota the fault planted) is not a wrong remediation, nor is a selection whose
    narrowing requirement names one (``-l app=geo,tier!=cache``). A write that failed still counts:
    kubectl goes on past a missing object and may time out after the change, so its exit status does
    not say that nothing changed. A call the server refused (``invalid``) never ran.
    """
    allowed = [ground_truth.component, *ground_truth.scope]
    named = {normalise(t) for d in ground_truth.details for t in d.replace(",", " ").split()}

    def ok(target: str) -> bool:
        target = normalise(target)
        return target in named or any(related(target, a) for a in allowed)

    wrong: list[str] = []
    for call in trajectory.tool_calls:
        if call.invalid or not is_write(call):
            continue
        if call.tool == KUBECTL:
            reach = _write_reach(call)
            bad = [normalise(n) for n in reach.names if not ok(n)]
            if reach.selected and not any(all(ok(v) for v in values) for values in reach.selected):
                bad += [normalise(v) for v in reach.selected[0]]
            if reach.everything:
                bad.append("*")
        elif call.error:
            continue  # a query tool that failed wrote nothing
        else:  # another write tool: right when its arguments name an allowed component
            bad = [] if any(mentions(s, a) for s in _strings(call.arguments) for a in allowed) else ["*"]
        if bad:
            what = _command_text(call) or " ".join(_strings(call.arguments))
            wrong.append(f"t={call.t:.1f}s {call.tool} {what}".strip() + f" (touches {', '.join(sorted(set(bad)))})")
    return wrong
