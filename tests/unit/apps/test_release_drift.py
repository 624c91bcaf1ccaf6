"""The reused-release check's diff: the manifest goes to kubectl diff in small parts, side by side,
and what any part finds (or cannot tell) is the answer; a diff that would repeat a clean one on
objects no write reached since is skipped, and only then (kubectl and the API are stood in for
here: pure logic)."""

from __future__ import annotations

import subprocess
import threading
from types import SimpleNamespace

import pytest
import yaml

from sregym.apps import release


def manifest(n: int) -> str:
    docs = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}"}} for i in range(n)]
    docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "lg", "namespace": "loadgen"}})
    return yaml.safe_dump_all(docs)


class FakeKube:
    """kubectl diff that reports the objects named in ``drift`` and fails on ``broken``; the API
    lists every object with its resourceVersion in ``versions`` (default ``"1"``)."""

    def __init__(self, drift=(), broken=(), unlistable=False):
        self.drift, self.broken, self.calls, self.lock = set(drift), set(broken), [], threading.Lock()
        self.versions: dict[str, str] = {}
        self.unlistable = unlistable

    def served_kinds(self, api_version):
        return {"Service": ("services", True), "Deployment": ("deployments", True)}

    def list_json(self, api_version, plural, namespace):
        if self.unlistable:
            return None
        names = [f"s{i}" for i in range(20)] if plural == "services" else ["lg"]
        return {"kind": "List", "items": [{"metadata": {"name": n, "resourceVersion": self.versions.get(n, "1")}}
                                          for n in names]}

    def kubectl(self, *args, input=None, check=False, timeout=0):
        ns = args[args.index("-n") + 1]
        names = [d["metadata"]["name"] for d in yaml.safe_load_all(input) if d]
        with self.lock:
            self.calls.append((ns, names))
        if self.broken & set(names):
            return subprocess.CompletedProcess(args, 1, "", "error: the server rejected it")
        found = [n for n in names if n in self.drift]
        out = "".join(f"diff -u -N /tmp/LIVE-1/v1.Service.{ns}.{n} /tmp/MERGED-2/v1.Service.{ns}.{n}\n--- a\n"
                      for n in found)
        return subprocess.CompletedProcess(args, 1 if found else 0, out, "")


def cluster(kube: FakeKube, kubeconfig: str = "k"):
    return SimpleNamespace(kube=kube, kubeconfig=kubeconfig, context=None)


@pytest.fixture(autouse=True)
def no_remembered_diffs(monkeypatch):
    monkeypatch.setattr(release, "_CLEAN", {})


def test_the_manifest_is_diffed_in_small_parts_per_namespace_and_every_object_is_diffed_once():
    kube = FakeKube()
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []
    assert all(len(names) <= release.DIFF_OBJECTS_PER_CALL for _, names in kube.calls)
    assert sorted(n for _, names in kube.calls for n in names) == sorted([f"s{i}" for i in range(14)] + ["lg"])
    assert {ns for ns, names in kube.calls if "lg" in names} == {"loadgen"}
    assert len(kube.calls) == 4  # 14 objects in parts of 6, and the load generator's namespace


def test_drift_found_in_any_part_is_reported_and_a_part_that_cannot_tell_makes_it_unknown():
    assert release.drifted(cluster(FakeKube(drift={"s1", "s13"})), "app", "hotel", text=manifest(14)) == [
        "v1.Service.hotel.s1", "v1.Service.hotel.s13"]
    assert release.drifted(cluster(FakeKube(drift={"s1"}, broken={"s12"})), "app", "hotel",
                           text=manifest(14)) == ["(unknown)"]


def test_a_clean_diff_is_not_repeated_while_no_write_reached_the_objects():
    kube = FakeKube()
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []
    diffed = len(kube.calls)
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []  # the next run's prepare
    assert len(kube.calls) == diffed


def test_an_agents_edit_after_a_clean_diff_is_diffed_and_found_and_found_again_until_put_back():
    """The attack: the release diffed clean (the last prepare), then the agent edits a Service. Its
    resourceVersion moved, so the check diffs again and finds it; a diff that found drift is never
    remembered, so the next check (the next run's prepare) diffs and finds it too."""
    kube = FakeKube()
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []
    kube.versions["s3"], kube.drift = "2", {"s3"}
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == ["v1.Service.hotel.s3"]
    diffed = len(kube.calls)
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == ["v1.Service.hotel.s3"]
    assert len(kube.calls) > diffed


def test_after_a_clean_diff_only_the_objects_written_since_are_diffed():
    kube = FakeKube()
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []
    kube.versions["s5"], kube.versions["lg"] = "2", "2"  # a fault and its recovery touched these two
    diffed = len(kube.calls)
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []
    assert sorted(n for _, names in kube.calls[diffed:] for n in names) == ["lg", "s5"]


def test_an_object_deleted_or_made_anew_is_diffed_again():
    kube = FakeKube()
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []
    kube.versions["lg"] = ""  # gone (or recreated: another version)
    diffed = len(kube.calls)
    release.drifted(cluster(kube), "app", "hotel", text=manifest(14))
    assert len(kube.calls) > diffed


def test_another_manifest_release_namespace_or_cluster_is_diffed_and_unlistable_objects_always_are():
    kube = FakeKube()
    assert release.drifted(cluster(kube), "app", "hotel", text=manifest(14)) == []
    for args in [(cluster(kube), "app", "hotel", manifest(13)), (cluster(kube), "app2", "hotel", manifest(14)),
                 (cluster(kube), "app", "hotel2", manifest(14)), (cluster(kube, "other"), "app", "hotel", manifest(14))]:
        diffed = len(kube.calls)
        release.drifted(*args[:3], text=args[3])
        assert len(kube.calls) > diffed, args[1:3]
    blind = FakeKube(unlistable=True)
    for _ in range(2):
        diffed = len(blind.calls)
        assert release.drifted(cluster(blind, "b"), "app", "hotel", text=manifest(14)) == []
        assert len(blind.calls) > diffed


def test_a_workloads_version_moves_with_its_spec_and_metadata_not_with_its_status():
    """A Deployment's status is written while its pods come back (after a recover): that must not
    make the next check diff again; a change of its spec (generation) or labels must."""
    base = {"metadata": {"name": "frontend", "generation": 3, "resourceVersion": "10", "labels": {"app": "f"},
                         "managedFields": [{"manager": "kube-controller-manager", "time": "t1"}]},
            "spec": {"replicas": 1}, "status": {"readyReplicas": 0}}
    status_write = {**base, "metadata": {**base["metadata"], "resourceVersion": "11",
                                         "managedFields": [{"manager": "kube-controller-manager", "time": "t2"}]},
                    "status": {"readyReplicas": 1}}
    spec_write = {**base, "metadata": {**base["metadata"], "generation": 4, "resourceVersion": "12"}}
    label_write = {**base, "metadata": {**base["metadata"], "resourceVersion": "13", "labels": {"app": "x"}}}
    v = release.object_version
    assert v(status_write) == v(base)
    assert v(spec_write) != v(base) and v(label_write) != v(base)
    service = {"metadata": {"name": "geo", "resourceVersion": "7"}}  # no generation: every write counts
    assert v(service) != v({"metadata": {"name": "geo", "resourceVersion": "8"}})
