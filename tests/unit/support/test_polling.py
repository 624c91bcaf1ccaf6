"""The shared poll loop of the integration tests."""

import pytest
from polling import eventually


def test_returns_the_first_truthy_value():
    values = iter([0, None, "ready"])
    assert eventually(lambda: next(values), timeout=5, every=0.01) == "ready"


def test_returns_none_on_timeout_when_nothing_is_named():
    assert eventually(lambda: False, timeout=0.05, every=0.01) is None


def test_fails_the_test_naming_what_it_waited_for():
    with pytest.raises(pytest.fail.Exception, match=r"node Ready did not hold within 0s \(last: \[\]\)"):
        eventually(lambda: [], timeout=0.05, every=0.01, what="node Ready")
