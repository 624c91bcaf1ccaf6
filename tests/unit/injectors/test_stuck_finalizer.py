"""stuck_finalizer against a small model of the API server's deletion rules: an object with
finalizers is only marked for deletion, no finalizer can be added to one being deleted, and it
goes once its last finalizer is removed; its controller then makes a new one (another uid)."""

from __future__ import annotations

import copy

import pytest
from kubernetes.dynamic.exceptions import NotFoundError, UnprocessibleEntityError

import injectors.stuck_finalizer as sf
from sregym.core.errors import FaultError, UserInputError
from sregym.core.problem import Selector
from sregym.injectors import KUBERNETES_API, FaultContext

NS, NAME = "pipeline", "pipeline-queue"
OWNER = {"apiVersion": "pipeline.sregym.io/v1", "kind": "QueueCluster", "name": NAME, "uid": "qc-1",
         "controller": True, "blockOwnerDeletion": True}
DRAIN = "pipeline.sregym.io/drain"


class Api:
    """One namespace of StatefulSets, as the API server and (``controller_runs``) their operator treat them."""

    def __init__(self, obj: dict, *, controller_runs: bool = True):
        self.objects = {NAME: obj}
        self.controller_runs = controller_runs
        self.made = 0
        self.deletes: list[dict] = []
        self.patches: list[tuple[list, str]] = []

    # what the injector reads
    def get(self, name: str) -> dict | None:
        if name not in self.objects and self.controller_runs:  # the operator's next resync
            self.made += 1
            self.objects[name] = statefulset(uid=f"made-{self.made}", owner=True)
        obj = self.objects.get(name)
        return copy.deepcopy(obj) if obj else None

    def _gone_if_free(self, name: str) -> None:
        meta = self.objects[name]["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.objects[name]

    # what the injector writes
    def patch(self, name: str, ops: list[dict], manager: str) -> None:
        if name not in self.objects:
            raise NotFoundError(_Err(404))
        obj = copy.deepcopy(self.objects[name])
        for op in ops:
            parts = [int(p) if p.isdigit() else p for p in op["path"].strip("/").split("/")]
            parent = obj
            for p in parts[:-1]:
                parent = parent[p]
            last = parts[-1]
            if op["op"] == "test":
                if parent[last] != op["value"]:
                    raise UnprocessibleEntityError(_Err(422))
            elif op["op"] == "add":
                parent.append(op["value"]) if last == "-" else parent.__setitem__(last, op["value"])
            elif op["op"] == "remove":
                del parent[last]
        before = self.objects[name]["metadata"]
        if before.get("deletionTimestamp") and len(obj["metadata"].get("finalizers") or []) > len(
                before.get("finalizers") or []):
            raise UnprocessibleEntityError(_Err(422))  # no new finalizers on an object being deleted
        self.objects[name] = obj
        self.patches.append((ops, manager))
        self._gone_if_free(name)

    def delete(self, name: str, body: dict) -> None:
        if name not in self.objects:
            raise NotFoundError(_Err(404))
        assert body["preconditions"]["uid"] == self.objects[name]["metadata"]["uid"]
        self.deletes.append(body)
        meta = self.objects[name]["metadata"]
        meta.setdefault("deletionTimestamp", "2026-11-27T07:00:00Z")
        self._gone_if_free(name)


class _Err(Exception):
    def __init__(self, status: int):
        super().__init__(status)
        self.status, self.reason, self.body, self.headers = status, "", "", {}


def statefulset(uid: str = "sts-1", *, owner: bool = True, finalizers: list[str] | None = None) -> dict:
    meta = {"name": NAME, "namespace": NS, "uid": uid, **({"ownerReferences": [OWNER]} if owner else {})}
    if finalizers is not None:
        meta["finalizers"] = list(finalizers)
    return {"kind": "StatefulSet", "metadata": meta, "spec": {"replicas": 1}}


class _Resource:
    def __init__(self, api: Api):
        self.api = api

    def patch(self, *, name, namespace, body, content_type, field_manager):
        assert namespace == NS and content_type == "application/json-patch+json"
        self.api.patch(name, body, field_manager)

    def delete(self, *, name, namespace, body):
        self.api.delete(name, body)


@pytest.fixture
def world(monkeypatch):
    def make(obj: dict | None = None, **kw) -> tuple[sf.StuckFinalizer, Api]:
        api = Api(obj or statefulset(), **kw)

        def get_object(kube, kind, name, namespace, api_version=None):
            assert (kind, namespace) == ("StatefulSet", NS)
            return api.get(name)

        def require_object(kube, kind, name, namespace, where="target", api_version=None):
            obj = get_object(kube, kind, name, namespace)
            if obj is None:
                raise UserInputError(f"{where}: {kind} {namespace}/{name} does not exist")
            return obj

        monkeypatch.setattr(sf, "get_object", get_object)
        monkeypatch.setattr(sf, "require_object", require_object)
        monkeypatch.setattr(sf, "resource", lambda kube, kind, api_version=None: _Resource(api))
        monkeypatch.setattr(sf.time, "sleep", lambda s: None)
        clock = iter(range(0, 100_000))
        monkeypatch.setattr(sf.time, "monotonic", lambda: next(clock))
        ctx = FaultContext(kube=object(), app_namespace=NS, hidden_namespace="sregym-system")
        params = sf.StuckFinalizerParams(finalizer=DRAIN, recreate_timeout_seconds=30)
        return sf.StuckFinalizer(params, Selector(kind="StatefulSet", name=NAME), ctx, KUBERNETES_API), api
    return make


def test_the_object_hangs_terminating_on_the_finalizer_and_recover_lets_its_controller_make_it_again(world):
    fault, api = world()
    state = fault.plan()
    assert (state.uid, state.controller, state.finalizer) == ("sts-1", f"QueueCluster/{NAME}", DRAIN)
    fault.inject(state)
    meta = api.objects[NAME]["metadata"]
    assert meta["deletionTimestamp"] and meta["finalizers"] == [DRAIN]
    assert api.deletes == [{"propagationPolicy": "Foreground", "preconditions": {"uid": "sts-1"}}]
    assert all(manager == "kubectl-edit" for _, manager in api.patches)  # what a person's kubectl leaves
    check = fault.verify(state)
    assert check.ok and "terminating since" in check.detail and DRAIN in check.detail
    fault.inject(state)  # again: nothing more (no second delete, no finalizer added to a deleting object)
    assert len(api.deletes) == 1 and len(api.patches) == 1
    fault.recover(state)
    assert api.objects[NAME]["metadata"]["uid"] == "made-1"  # made again by its controller
    assert not fault.verify(state).ok
    fault.recover(state)  # idempotent
    assert api.made == 1 and len(api.patches) == 2


def test_recover_takes_off_only_its_own_finalizer(world):
    fault, api = world(statefulset(finalizers=["other.io/keep"]))
    state = fault.plan()
    fault.inject(state)
    assert api.objects[NAME]["metadata"]["finalizers"] == ["other.io/keep", DRAIN]
    with pytest.raises(FaultError, match="is still being deleted"):
        fault.recover(state)  # the other finalizer's controller has not let it go
    assert api.objects[NAME]["metadata"]["finalizers"] == ["other.io/keep"]


def test_a_crash_between_finalizer_and_delete_recovers_to_the_object_as_it_was(world):
    fault, api = world(statefulset(finalizers=["other.io/keep"]))
    state = fault.plan()
    before = copy.deepcopy(api.objects[NAME])
    fault._patch(state, [{"op": "add", "path": "/metadata/finalizers/-", "value": DRAIN}])  # inject's first step
    assert not fault.verify(state).ok
    fault.recover(state)
    assert api.objects[NAME] == before and not api.deletes


def test_recover_after_the_agent_removed_the_finalizer_only_waits_for_the_new_object(world):
    fault, api = world()
    state = fault.plan()
    fault.inject(state)
    assert api.objects[NAME]["metadata"]["finalizers"] == [DRAIN]
    api.patch(NAME, [{"op": "remove", "path": "/metadata/finalizers/0"}], "kubectl-patch")
    fault.recover(state)
    assert api.objects[NAME]["metadata"]["uid"] == "made-1" and len(api.patches) == 2


def test_recover_says_which_controller_did_not_make_it_again(world):
    fault, api = world(controller_runs=False)
    state = fault.plan()
    fault.inject(state)
    with pytest.raises(FaultError) as caught:
        fault.recover(state)
    assert f"StatefulSet {NS}/{NAME} is gone and its controller QueueCluster/{NAME} has not made it again" in str(
        caught.value)
    assert NAME not in api.objects


def test_background_cascade_is_asked_for(world, monkeypatch):
    fault, api = world()
    fault.params = sf.StuckFinalizerParams(finalizer=DRAIN, cascade="background")
    fault.inject(fault.plan())
    assert api.deletes[0]["propagationPolicy"] == "Background"


@pytest.mark.parametrize(("obj", "message"), [
    (statefulset(owner=False), "has no controller"),
    (statefulset(finalizers=[DRAIN]), "already carries finalizer"),
])
def test_plan_refuses_what_it_could_not_undo(world, obj, message):
    fault, _ = world(obj)
    with pytest.raises(UserInputError, match=message):
        fault.plan()


def test_plan_refuses_an_object_already_being_deleted(world):
    obj = statefulset()
    obj["metadata"]["deletionTimestamp"] = "2026-11-27T06:00:00Z"
    fault, _ = world(obj)
    with pytest.raises(UserInputError, match="already being deleted"):
        fault.plan()


def test_a_target_without_kind_and_name_is_refused(world):
    fault, _ = world()
    fault.target = Selector(name=NAME)
    with pytest.raises(UserInputError, match="name the object's kind and name"):
        fault.plan()


@pytest.mark.parametrize("bad", ["drain", "Example.com/x", "a.io/", "/x"])
def test_a_finalizer_that_is_not_a_qualified_name_is_a_parameter_error(bad):
    with pytest.raises(UserInputError, match="finalizer"):
        sf.StuckFinalizer.parse_params({"finalizer": bad})


def test_the_pipeline_problem_is_fixable_with_the_agents_rights_and_a_stuck_queue_cluster_would_not_be():
    """pipeline_queue_stuck_finalizer's fix is a patch of the StatefulSet's finalizers, which the
    on-call account may make; the QueueCluster was not chosen as the stuck object because the
    account may not create one again once it is deleted."""
    from sregym.cluster.agent_access import OPERATOR_GROUP, app_namespace_rules
    from sregym.core.loader import load_problem_arg

    def may(group: str, resource: str, verb: str) -> bool:
        return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
                   for r in app_namespace_rules())

    fault = load_problem_arg("pipeline_queue_stuck_finalizer").problem.faults[0]
    assert (fault.injector, fault.target.kind) == ("stuck_finalizer", "StatefulSet")
    assert may("apps", "statefulsets", "patch")
    assert not may(OPERATOR_GROUP, "queueclusters", "create")
