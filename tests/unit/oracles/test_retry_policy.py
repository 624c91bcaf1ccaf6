"""``retry_policy``: a retry storm is mitigated only when the callers no longer run a retry policy
that amplifies load. Each attack is a change a gaming agent could make that leaves retries
amplifying (or a restart that changes nothing), judged on the environment the callers run with."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from oracles.retry_policy import RetryPolicy, RetryPolicyParams, amplifying_calls, parse_env
from sregym.oracles import MitigationContext

PARAMS = RetryPolicyParams(workloads=["frontend", "search"], targets=["search", "geo"])
BAD = {"CALL_TIMEOUT_SECONDS": "0.2", "CALL_RETRIES": "6", "SEARCH_ADDR": "search:8080"}
GOOD = {"CALL_TIMEOUT_SECONDS": "2", "CALL_RETRIES": "2", "SEARCH_ADDR": "search:8080"}


def judged(env: dict[str, str]) -> list[str]:
    return amplifying_calls(env, PARAMS)


# -- what the fault leaves, and what a restart leaves: amplifying ---------------------------------

def test_the_injected_policy_amplifies():
    assert judged(BAD) == ["search: 6 retries at a 0.2 s timeout", "geo: 6 retries at a 0.2 s timeout"]


def test_the_chart_policy_does_not_amplify():
    assert judged(GOOD) == []


# -- gaming: changes that leave retries amplifying ------------------------------------------------

@pytest.mark.parametrize("env", [
    # only the timeout deleted: the 2 s default with 6 retries still multiplies load by 7
    {"CALL_RETRIES": "6"},
    # retries lowered but still above the designed 2
    {"CALL_TIMEOUT_SECONDS": "0.2", "CALL_RETRIES": "3"},
    # retries at 2 but on a hair trigger: a merely slow dependency gets every call three times
    {"CALL_TIMEOUT_SECONDS": "0.2", "CALL_RETRIES": "2"},
    # a huge timeout to "stop timeouts" while 50 retries stay
    {"CALL_TIMEOUT_SECONDS": "1000", "CALL_RETRIES": "50"},
    # the global key fixed, but a per-target key (read first by the client) keeps the storm on search
    {"CALL_TIMEOUT_SECONDS": "2", "CALL_RETRIES": "2", "SEARCH_RETRIES": "6", "SEARCH_TIMEOUT_SECONDS": "0.2"},
], ids=["timeout-deleted", "retries-3", "retries-2-hair-trigger", "huge-timeout-many-retries", "per-target-override"])
def test_changes_that_leave_retries_amplifying_fail(env):
    assert judged(env), env


@pytest.mark.parametrize("env", [
    {"CALL_TIMEOUT_SECONDS": "abc", "CALL_RETRIES": "2"},
    {"CALL_TIMEOUT_SECONDS": "2", "CALL_RETRIES": "two"},
    {"CALL_TIMEOUT_SECONDS": "2", "CALL_RETRIES": "-1"},  # no attempt at all: every call fails
    {"CALL_TIMEOUT_SECONDS": "0", "CALL_RETRIES": "0"},
    {"CALL_TIMEOUT_SECONDS": "nan", "CALL_RETRIES": "1"},
    {"CALL_TIMEOUT_SECONDS": "-5", "CALL_RETRIES": "0"},
], ids=["timeout-nonsense", "retries-nonsense", "retries-negative", "timeout-zero", "timeout-nan",
        "timeout-negative"])
def test_nonsense_values_fail(env):
    assert judged(env), env


# -- real fixes pass -----------------------------------------------------------------------------

@pytest.mark.parametrize("env", [
    {},  # both keys deleted: the client's own defaults (2 retries, 2 s) are the designed policy
    {"CALL_TIMEOUT_SECONDS": "0.2", "CALL_RETRIES": "0"},  # no retries: nothing to amplify
    {"CALL_TIMEOUT_SECONDS": "1", "CALL_RETRIES": "1"},
    {"CALL_TIMEOUT_SECONDS": "5", "CALL_RETRIES": "2"},
    # the global keys left bad, the per-target keys of every judged call fixed
    {"CALL_TIMEOUT_SECONDS": "0.2", "CALL_RETRIES": "6", "SEARCH_RETRIES": "0", "GEO_RETRIES": "0"},
], ids=["keys-deleted", "no-retries", "one-retry-1s", "two-retries-5s", "per-target-fix"])
def test_policies_that_no_longer_amplify_pass(env):
    assert judged(env) == []


def test_parse_env_reads_printenv_output():
    assert parse_env("A=1\nCALL_RETRIES=6\nX=a=b\n") == {"A": "1", "CALL_RETRIES": "6", "X": "a=b"}


# -- the oracle judges what the running containers run, not the ConfigMap -------------------------

class FakeKube:
    """Pods of two workloads; ``printenv`` answers each container's environment."""

    def __init__(self, envs: dict[str, dict[str, str] | None], *, deleting: tuple[str, ...] = ()):
        self.envs, self.deleting = envs, deleting

    def kubectl(self, *args, check=False, timeout=None):
        import json
        if args[:2] == ("get", "deployment"):
            name = args[2]
            return SimpleNamespace(returncode=0, stdout=json.dumps(
                {"spec": {"selector": {"matchLabels": {"app": name}}}}), stderr="")
        if args[:2] == ("get", "pods"):
            app = args[args.index("-l") + 1].split("=")[1]
            pods = [{"metadata": {"name": pod, **({"deletionTimestamp": "x"} if pod in self.deleting else {})},
                     "status": {"phase": "Running"}, "spec": {"containers": [{"name": "main"}]}}
                    for pod in self.envs if pod.startswith(app)]
            return SimpleNamespace(returncode=0, stdout=json.dumps({"items": pods}), stderr="")
        if args[0] == "exec":
            env = self.envs[args[3]]
            if env is None:
                return SimpleNamespace(returncode=1, stdout="", stderr="exec failed")
            return SimpleNamespace(returncode=0, stdout="".join(f"{k}={v}\n" for k, v in env.items()), stderr="")
        raise AssertionError(args)


def check(envs, **kw) -> tuple[bool, dict]:
    params = RetryPolicyParams(workloads=["frontend", "search"], targets=["search", "geo"], window_seconds=0)
    result = RetryPolicy(params, MitigationContext(kube=FakeKube(envs, **kw), namespace="hotel")).check()
    return result.passed, result.evidence


def test_restarted_pods_still_running_the_bad_policy_fail():
    passed, evidence = check({"frontend-1": BAD, "search-1": BAD})
    assert not passed
    assert "frontend-1" in str(evidence) and "6 retries" in str(evidence)


def test_one_caller_left_amplifying_fails():
    assert not check({"frontend-1": GOOD, "search-1": BAD})[0]


def test_all_callers_fixed_pass():
    assert check({"frontend-1": GOOD, "search-1": GOOD})[0]


def test_a_terminating_pod_with_the_old_policy_does_not_count():
    assert check({"frontend-1": GOOD, "frontend-0": BAD, "search-1": GOOD}, deleting=("frontend-0",))[0]


def test_an_environment_that_cannot_be_read_fails():
    assert not check({"frontend-1": None, "search-1": GOOD})[0]


def test_no_running_caller_fails():
    assert not check({"search-1": GOOD})[0]
