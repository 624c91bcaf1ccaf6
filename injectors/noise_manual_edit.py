"""Noise: a person's harmless `kubectl edit` of an app object (any component, the root cause's too).

A fault's field edit leaves the manager `kubectl-edit` in the object's managedFields, as a person's
bad edit would. Were faults the only source of that manager, an agent could list managedFields and
name its carrier without diagnosing anything. This noise makes the edits people make all day with
the same manager: a note or a label on a Deployment, StatefulSet or Service, or more revision
history kept; none changes what the app does, so it neither cures nor masks a fault and may touch
the root-cause component. A note on a workload's pods (its template) rolls them, as a restart does:
that one only outside the root-cause components (noise restarts may roll those; an edit that rolls
also writes, and undoes, a field of the template faults edit), as is a variable added to a
container's env (a log format, a change ticket: names no app reads), which writes the kind of
field faults write. It never overwrites a value someone set (only keys that
are absent; the history limit only grows) and undoes its edit when it stops. It never edits a
ConfigMap or Secret: an oracle dates a key by the time of the manager entry that owns it, and any
edit under the same manager moves that time.
"""

from __future__ import annotations

import random
from typing import Literal

from pydantic import Field

from sregym.injectors import (ABSENT, EditState, NoiseParams, ObjectEdit, Verification, candidates, choose, dig, edit,
                              injector, require_object)

KINDS = ("Deployment", "StatefulSet", "Service")
HISTORY = ["spec", "revisionHistoryLimit"]  # how many old revisions the controller keeps (rollout history)
HISTORY_KINDS = ("Deployment", "StatefulSet")
POD_NOTES = ["spec", "template", "metadata", "annotations"]  # one key under it, never the whole map
# What people write on objects by hand: who owns it, where its runbook is, a note.
NOTES = {
    "owner": ("team-storefront", "team-platform", "team-checkout", "team-search"),
    "runbook": ("see the team wiki, section on-call", "wiki: services/{name}", "ask in #oncall before scaling"),
    "description": ("{name} service", "serves {name} requests", "{name}, see the README"),
    "contact": ("#oncall-platform", "#team-storefront", "platform-oncall"),
}
# Variables people add to a container by hand; no app, runtime or image entrypoint here reads them.
ENV = {
    "LOG_FORMAT": ("json", "logfmt"),
    "CHANGE_TICKET": ("CHG-1042", "CHG-2210", "CHG-3307"),
    "ONCALL_CHANNEL": ("#oncall-platform", "#team-storefront"),
}
CONTAINERS = ["spec", "template", "spec", "containers"]
SPEC_SORTS = ("env",)  # edits of the fields faults edit, not of metadata
LABELS = {
    "team": ("storefront", "platform", "checkout", "search"),
    "cost-center": ("cc-1042", "cc-2210", "cc-3307"),
    "owner": ("platform", "storefront"),
}


Change = tuple[list[str | int], object, object]  # (path, before, after)


def possible_edits(obj: dict, *, may_roll: bool = False) -> dict[str, list[Change]]:
    """The harmless edits a person might make to ``obj``, by sort (a note on it or on its pods, a
    label, the history kept): only keys that are absent, so nothing someone set is overwritten
    (``LABELS`` holds none of the component labels noise's choices go by). A note on the pods rolls
    them and writes the template faults edit: only with ``may_roll`` (not a root-cause component)."""
    meta, name = obj["metadata"], obj["metadata"]["name"]
    out: dict[str, list[Change]] = {}
    if meta.get("annotations"):  # JSON patch adds a key only under a map that exists
        out["note"] = [(["metadata", "annotations", k], ABSENT, v.format(name=name))
                       for k, values in NOTES.items() if k not in meta["annotations"] for v in values]
    pod_notes = dig(obj, POD_NOTES)
    # `dig` answers the ABSENT marker (itself a dict) where the template has no annotations map
    if may_roll and obj["kind"] in HISTORY_KINDS and isinstance(pod_notes, dict) and pod_notes and pod_notes != ABSENT:
        out["pod note"] = [([*POD_NOTES, k], ABSENT, v.format(name=name))
                           for k, values in NOTES.items() if k not in pod_notes for v in values]
    if meta.get("labels"):
        out["label"] = [(["metadata", "labels", k], ABSENT, v)
                        for k, values in LABELS.items() if k not in meta["labels"] for v in values]
    if may_roll and obj["kind"] == "Deployment":  # surges a new pod first; a StatefulSet's goes down first
        out["env"] = env_edits(obj)
    kept = dig(obj, HISTORY)
    if obj["kind"] in HISTORY_KINDS and isinstance(kept, int):
        # more kept, so nothing is pruned; its manager entry stays after the undo (the value changed
        # twice), as a person's edit-and-revert leaves it, and as a fault's recover leaves its own
        out["history"] = [(HISTORY, kept, kept + more) for more in (2, 3, 5, 10)]
    return {sort: changes for sort, changes in out.items() if changes}


def env_edits(obj: dict) -> list[Change]:
    """One more variable in a container's env: the whole list is the field (``before`` the list as it
    was, or ABSENT), so the undo puts back exactly what was there. A container that already has one
    of ``ENV``'s names (another hand edit in place) is left alone, so two undos never cross."""
    out: list[Change] = []
    for i, c in enumerate(dig(obj, CONTAINERS) if isinstance(dig(obj, CONTAINERS), list) else []):
        env = c.get("env")
        if env is not None and not isinstance(env, list):
            continue
        if any(v.get("name") in ENV for v in env or []):
            continue
        out += [([*CONTAINERS, i, "env"], ABSENT if env is None else env, [*(env or []), {"name": k, "value": v}])
                for k, values in ENV.items() for v in values]
    return out


def plan_edit(obj: dict, seed: int, *, may_roll: bool = False, sort: str = "any") -> dict | None:
    """The seeded harmless edit of ``obj`` (a sort, then a change of that sort), or None when it offers
    none; ``sort="spec"`` takes an edit of the fields faults edit where ``obj`` offers one."""
    options = possible_edits(obj, may_roll=may_roll)
    if sort == "spec" and any(k in options for k in SPEC_SORTS):
        options = {k: v for k, v in options.items() if k in SPEC_SORTS}
    if not options:
        return None
    rnd = random.Random(f"{seed}:noise_manual_edit:change")
    path, before, after = rnd.choice(options[rnd.choice(sorted(options))])
    return edit(obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"], path, before, after)


class ManualEditParams(NoiseParams):
    sort: Literal["any", "spec"] = Field("any", description="spec: edit what faults edit (a container's env) "
                                                            "on a component it may roll, where there is one")
    spare_root: bool = Field(False, description="leave the root-cause components alone too (an edit right after "
                                                "the faults: on the fault's object it would only move the "
                                                "fault's entry later, never another's)")


class ManualEditState(EditState):
    kind: str = Field("", description="the object's kind")
    namespace: str = Field("", description="its namespace")
    name: str = Field("", description="the object edited")


@injector("noise_manual_edit")
class NoiseManualEdit(ObjectEdit[ManualEditParams]):
    """Edit one app object by hand, harmlessly (`kubectl edit`'s manager); undone when it stops."""

    Params = ManualEditParams
    State = ManualEditState

    def plan(self) -> ManualEditState:
        # list items carry no kind of their own: tag each with the kind it was listed as
        objs = [o | {"kind": kind} for kind in KINDS
                for o in candidates(self.ctx, kind, self.params.exclude, harmless=not self.params.spare_root)]
        # what a roll may touch: outside the run's root-cause components too
        rollable = {(kind, o["metadata"]["name"]) for kind in HISTORY_KINDS
                    for o in candidates(self.ctx, kind, self.params.exclude)}
        may_roll = {id(o): (o["kind"], o["metadata"]["name"]) in rollable for o in objs}
        eligible = [o for o in objs if possible_edits(o)]
        if self.params.sort == "spec":
            eligible = [o for o in eligible if any(
                k in possible_edits(o, may_roll=may_roll[id(o)]) for k in SPEC_SORTS)] or eligible
        obj = choose(self.ctx.seed, "noise_manual_edit", eligible, "object to edit")
        e = plan_edit(obj, self.ctx.seed, may_roll=may_roll[id(obj)], sort=self.params.sort)
        assert e is not None  # chosen among objects that offer an edit
        return ManualEditState(edits=[e], kind=e["kind"], namespace=e["namespace"], name=e["name"])

    def verify(self, state: ManualEditState) -> Verification:
        e = state.edits[0]
        now = dig(require_object(self.ctx.kube, e["kind"], e["name"], e["namespace"]), e["path"])
        return Verification(now == e["after"], f"{e['kind']} {e['name']} {'.'.join(map(str, e['path']))}: {now}")

