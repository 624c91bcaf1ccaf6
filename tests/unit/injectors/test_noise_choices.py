"""Noise: seeded choices repeat, excluded components are never chosen."""

import pytest

from injectors.noise_log_burst import warning_lines
from sregym.core.errors import FaultError
from sregym.injectors._noise import choose, is_excluded


def _obj(name, labels=None):
    return {"metadata": {"name": name, "labels": labels or {}}}


def test_same_seed_same_choice_and_seeds_differ():
    items = [f"svc-{i}" for i in range(20)]
    assert choose(5, "noise_pod_restart", items, "pod") == choose(5, "noise_pod_restart", items, "pod")
    assert len({choose(s, "noise_pod_restart", items, "pod") for s in range(30)}) > 3


def test_excluded_components_match_by_name_prefix_and_labels():
    assert is_excluded(_obj("geo"), ["geo"])
    assert is_excluded(_obj("geo-7d9f-abc"), ["geo"])
    assert is_excluded(_obj("x-1", {"app.kubernetes.io/name": "geo"}), ["geo"])
    assert not is_excluded(_obj("geography"), ["geo"])
    assert not is_excluded(_obj("frontend-1"), ["geo"])


def test_excluded_never_chosen_over_many_seeds():
    objs = [_obj(n) for n in ("geo-1", "geo-2", "frontend-1", "search-1")]
    for seed in range(200):
        pick = choose(seed, "noise_x", [o for o in objs if not is_excluded(o, ["geo"])], "pod")
        assert not pick["metadata"]["name"].startswith("geo")


def test_nothing_eligible_is_a_clear_error():
    with pytest.raises(FaultError, match="no eligible pod"):
        choose(1, "p", [], "pod")


def test_log_lines_are_seeded_and_harmless():
    a, b = warning_lines(3, 10), warning_lines(3, 10)
    strip = [x.split(" ", 1)[1] for x in a]
    assert strip == [x.split(" ", 1)[1] for x in b]
    assert all("level=warn" in x and "error" not in x.lower() for x in a)
