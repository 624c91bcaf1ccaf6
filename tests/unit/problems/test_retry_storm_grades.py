"""A retry storm is graded mitigated only when its sustaining cause is gone: besides the SLO, each
retry-storm problem grades the retry policy its callers run (``retry_policy``). Without it a
restart that happened to land after the trigger passed the SLO with the bad retries in place
(hotel_retry_storm_after_search_stall, seed 0, validation 2026-11-26), so a restart's grade was
chance."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from oracles.retry_policy import RetryPolicyParams, amplifying_calls
from sregym.core.loader import load_problem_file

ROOT = Path(__file__).parents[3]
STORMS = sorted(p for p in (ROOT / "problems").glob("*.yaml")
                if (load_problem_file(p).problem.tags.fault_family or "") == "retry_storm")


def test_the_retry_storms_are_found():
    assert {p.stem for p in STORMS} >= {"hotel_retry_storm_after_db_stall", "hotel_retry_storm_after_search_stall",
                                        "shop_retry_storm_after_cpu_spike"}


def chart_settings(app: str) -> dict[str, str]:
    return dict(yaml.safe_load((ROOT / "charts" / app / "values.yaml").read_text())["settings"])


@pytest.mark.parametrize("path", STORMS, ids=lambda p: p.stem)
def test_a_restart_alone_cannot_pass_a_retry_storm(path):
    problem = load_problem_file(path).problem
    assert not problem.ground_truth.restart_cures, f"{path.name}: a restart leaves the retry settings in place"
    policies = [RetryPolicyParams.model_validate(r.params) for r in problem.oracles.mitigation
                if r.name == "retry_policy"]
    assert len(policies) == 1, f"{path.name}: grade the callers' retry policy (retry_policy), not only the SLO"
    params = policies[0]
    settings = chart_settings(problem.app.name)
    injected = dict(settings)
    callers: set[str] = set()
    for fault in problem.faults:
        if fault.injector == "config_value":
            injected[fault.params["key"]] = fault.params["value"]
            callers |= set(fault.params.get("restart") or [])
    # every workload that was rolled onto the bad values is judged, and the bad values fail it ...
    assert callers <= set(params.workloads), f"{path.name}: retry_policy must judge {sorted(callers)}"
    assert amplifying_calls(injected, params), f"{path.name}: the injected settings must fail retry_policy"
    # ... while the settings the app is deployed with (its baseline) pass
    assert amplifying_calls(settings, params) == [], f"{path.name}: the chart's settings must pass retry_policy"
