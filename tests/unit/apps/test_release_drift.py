"""The reused-release check's diff: the manifest goes to kubectl diff in small parts, side by side,
and what any part finds (or cannot tell) is the answer (kubectl is stood in for here: pure logic)."""

from __future__ import annotations

import subprocess
import threading
from types import SimpleNamespace

import yaml

from sregym.apps import release


def manifest(n: int) -> str:
    docs = [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}"}} for i in range(n)]
    docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "lg", "namespace": "loadgen"}})
    return yaml.safe_dump_all(docs)


class FakeKube:
    """kubectl diff that reports the objects named in ``drift`` and fails on ``broken``."""

    def __init__(self, drift=(), broken=()):
        self.drift, self.broken, self.calls, self.lock = set(drift), set(broken), [], threading.Lock()

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


def cluster(kube: FakeKube):
    return SimpleNamespace(kube=kube)


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
