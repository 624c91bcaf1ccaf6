"""Primitives with a typed planned state read the state journals already hold, and write it back
as the same JSON (so a run's journal and `sregym cleanup` agree across versions)."""

from __future__ import annotations

import json

import pytest

from sregym.injectors import INJECTORS, FaultContext, PlannedState

# the planned state of each typed primitive as journals written before it had a State model hold it
OLD_STATES = {
    "pod_kill": {"pods": [["app", "web-5d9c-x1", "0b7e-uid"], ["app", "web-5d9c-x2", "1c8f-uid"]]},
}


@pytest.mark.parametrize("name", sorted(OLD_STATES))
def test_an_old_journaled_state_loads_typed_and_dumps_unchanged(name: str):
    cls = INJECTORS.get(name)
    assert cls.State is not None and issubclass(cls.State, PlannedState)
    state = cls.load_state(OLD_STATES[name])
    assert isinstance(state, cls.State)
    assert json.loads(json.dumps(cls.dump_state(state))) == OLD_STATES[name]


def test_pod_kill_reads_the_pods_of_an_old_journal_entry():
    state = INJECTORS.get("pod_kill").load_state(OLD_STATES["pod_kill"])
    assert state.pods == [("app", "web-5d9c-x1", "0b7e-uid"), ("app", "web-5d9c-x2", "1c8f-uid")]


def test_a_primitive_without_a_state_model_keeps_its_dict():
    cls = INJECTORS.get("replicas_zero")
    assert cls.State is None
    raw = {"edits": [], "workload": ["Deployment", "app", "web"], "container": "web"}
    assert cls.load_state(raw) is raw and cls.dump_state(raw) == raw


def test_a_context_rebuilt_from_an_old_journal_has_the_runs_labels_and_exclusions():
    extras = {"run_id": "r1", "labels": {"a": "b"}, "exclude": ["geo"], "node": "n1"}
    ctx = FaultContext.from_journal(extras, kube=None, app_namespace="app", hidden_namespace="hidden")
    assert (ctx.run_id, ctx.labels, ctx.exclude, ctx.node, ctx.only_pods) == ("r1", {"a": "b"}, ["geo"], "n1", None)
    assert ctx.journal_fields() == extras


def test_a_context_without_journaled_labels_still_labels_what_it_creates_as_sregyms():
    ctx = FaultContext.from_journal({}, kube=None, app_namespace="app", hidden_namespace="hidden")
    from sregym.core.constants import OWNER_LABEL, OWNER_VALUE
    assert ctx.labels == {OWNER_LABEL: OWNER_VALUE}
