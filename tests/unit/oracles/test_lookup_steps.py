"""The kit reads a field at parsed path steps directly (what the chart checks do after cutting a
path at its first selector), with no round trip through a path string that some keys and
selector values cannot be written back into."""

from __future__ import annotations

from sregym.oracles import MISSING, lookup, lookup_steps, parse_path

POD = {"metadata": {"annotations": {"app.kubernetes.io/part-of": "shop"}},
       "spec": {"containers": [{"name": "redis", "args": ["--maxmemory", "48mb"]},
                               {"name": "side]car=1", "image": "busybox"}]}}


def test_parsed_steps_read_what_the_path_reads():
    for path in ("spec.containers[name=redis].args[1]", 'metadata.annotations["app.kubernetes.io/part-of"]',
                 "spec.containers[0].name", "spec.containers[name=redis].nope"):
        assert lookup_steps(POD, parse_path(path)) == lookup(POD, path)


def test_steps_reach_keys_and_selector_values_a_path_string_cannot_spell():
    steps = [("key", "spec"), ("key", "containers"), ("match", ("name", "side]car=1")), ("key", "image")]
    assert lookup_steps(POD, steps) == "busybox"
    assert lookup_steps(POD, [("key", "spec"), ("index", 5)]) is MISSING
