"""The curated problem files: they load, pass the registry checks, cover what the benchmark
promises (layers, misleading, metastable, concurrent, no-op controls) and never leak the answer."""

from __future__ import annotations

import pytest

from sregym.conductor.checks import check_problem
from sregym.core.loader import REPO_PROBLEMS_DIR, load_catalog
from sregym.core.problem import Layer
from sregym.report.problem_docs import render

DOCS = REPO_PROBLEMS_DIR.parent / "docs" / "problems.md"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.fixture(scope="module")
def problems(catalog):
    return {pid: lp.problem for pid, lp in catalog.problems.items()}


def test_every_problem_passes_the_static_checks(catalog):
    assert len(catalog.problems) >= 40
    for lp in catalog.problems.values():
        check_problem(lp, noise=True)  # raises ProblemFileError naming file and line


def test_every_app_and_every_fault_layer_are_covered(problems):
    apps = {p.app.name for p in problems.values()}
    assert apps == {"hotel-reservation", "online-shop", "event-pipeline"}
    layers = {p.tags.layer.value for p in problems.values()}
    assert {"application", "kubernetes", "control-plane", "os", "hardware", "network", "none"} <= layers


def test_latent_sector_error_needs_the_data_moved_not_a_restart(problems):
    p = problems["latent_sector_error"]
    assert [f.injector for f in p.faults] == ["latent_sector_error"]
    assert p.faults[0].target.kind == "StatefulSet" and p.faults[0].target.name == "shop-db"
    # the oracle reads the bad file itself: a restart that leaves the blocks bad does not pass it
    assert [o.name for o in p.oracles.mitigation] == ["volume_readable"]
    assert "restart" not in p.alert.lower()


def test_latent_sector_error_bad_blocks_lie_under_cold_data(problems):
    """The blocks must sit under data the database never rewrites (a write covering a bad block
    remaps it, on a disk as in dm-dust and sectorfs): the order archives in pg_largeobject, whose
    file name is fixed in every shop database, written once and frozen, mid-file (not the last
    page, which grows), explicit so every run breaks the same shoppers' pages."""
    fault = problems["latent_sector_error"].faults[0]
    [path] = fault.params["paths"]
    assert path.endswith("/base/16384/2613")  # pg_largeobject of the shop database
    blocks = fault.params["blocks"]
    assert blocks and all(20 <= b <= 240 for b in blocks)  # the file has 268 blocks of 4 KiB
    assert problems["latent_sector_error"].oracles.mitigation[0].params["path"] == path


def test_required_config_and_kubernetes_faults_exist(problems):
    used = {(f.injector, p.tags.failure_mode) for p in problems.values() for f in p.faults}
    injectors = {i for i, _ in used}
    modes = {m for _, m in used}
    assert {"wrong_port", "missing_env", "auth_failure", "pool_exhaustion", "cache_miss"} <= modes
    assert {"service_misconfig", "image_tag", "probe_misconfig", "resource_quota", "unschedulable",
            "resource_limits", "syscall_failure", "resource_stress", "latent_sector_error"} <= injectors


def test_misleading_problems_put_the_loudest_symptom_elsewhere(problems):
    misleading = [p for p in problems.values() if "misleading" in p.tags.extra]
    assert len(misleading) >= 3
    for p in misleading:
        others = [s for s in p.ground_truth.scope if s != p.ground_truth.component]
        assert others, f"{p.id}: a misleading problem needs victims other than the root cause"


def test_metastable_problems_have_a_vulnerability_and_a_removed_trigger(problems):
    metastable = [p for p in problems.values() if "metastable" in p.tags.extra]
    assert len(metastable) >= 3
    for p in metastable:
        roles = {f.role for f in p.faults}
        assert {"vulnerability", "trigger"} <= roles, p.id
        triggers = [f for f in p.faults if f.role == "trigger"]
        assert all(f.duration is not None for f in triggers), f"{p.id}: the trigger must be removed"
        # the vulnerability stays: the degraded state must outlive the trigger
        assert all(f.duration is None for f in p.faults if f.role == "vulnerability"), p.id
        assert set(p.ground_truth.faulty_fault_ids) <= {f.id for f in p.faults if f.role == "vulnerability"}


def test_concurrent_problems_have_two_independent_root_causes(problems):
    concurrent = [p for p in problems.values() if "concurrent" in p.tags.extra]
    assert len(concurrent) >= 3
    for p in concurrent:
        roots = p.root_cause_faults
        assert len(roots) >= 2, p.id
        assert len({(f.target.kind, f.target.name) for f in roots}) >= 2, f"{p.id}: faults must be independent"
        assert len(p.oracles.mitigation) >= 2, f"{p.id}: each fault needs its own oracle"


def test_no_op_controls_have_noise_and_nothing_to_fix(problems):
    controls = [p for p in problems.values() if p.no_op]
    assert len(controls) >= 2
    for p in controls:
        assert not p.faults and p.noise.per_window > 0


def test_alerts_never_name_the_fault_primitive_or_the_mechanism(problems):
    for p in problems.values():
        alert = p.alert.lower()
        for f in p.faults:
            assert f.injector.replace("_", " ") not in alert, p.id
        assert p.ground_truth.mechanism.lower() not in alert, p.id


def test_suites_hold_known_problems_and_full_holds_all(catalog):
    full = {lp.id for lp in catalog.suite_problems("full")}
    assert full == set(catalog.problems)
    lite = [lp.id for lp in catalog.suite_problems("lite")]
    assert lite and "latent_sector_error" in lite


# The load layer's one problem is not valid at the first try on every seed yet; the control-plane
# layer's admission-webhook problems take 190-300 s a seed to validate (the restart step leaves the
# whole namespace refused, every pod comes back cold after recovery, a 90 s SLO window), a third of
# the lite suite's 509 s, which CI's tests stage has no margin left for on a cold machine
# (problems/suites/lite.yaml, docs/testing.md)
NOT_IN_LITE_YET = {Layer.load, Layer.control_plane}


def test_lite_holds_every_app_and_every_layer_and_a_control(catalog):
    """Issue 19: CI validates the lite suite on every run, so it must hold a problem of every app and
    every layer (a no-op control too: validated under noise, it proves that noise alone breaks nothing)."""
    lite = [catalog.problems[lp.id].problem for lp in catalog.suite_problems("lite")]
    every = [lp.problem for lp in catalog.problems.values()]
    assert {p.app.name for p in lite} == {p.app.name for p in every}
    assert {p.tags.layer for p in lite} == {p.tags.layer for p in every} - NOT_IN_LITE_YET
    assert any(p.no_op for p in lite)


def test_problem_docs_are_up_to_date(catalog):
    assert DOCS.read_text(encoding="utf-8") == render(catalog), \
        "docs/problems.md is stale: run `sregym generate --docs docs/problems.md`"


def test_problem_docs_show_the_alert_but_not_the_answer(catalog):
    page = render(catalog)
    for lp in catalog.problems.values():
        p = lp.problem
        assert f"`{p.id}`" in page
        assert " ".join(p.ground_truth.root_cause.split()) not in page
        for d in p.ground_truth.details:
            if len(d) > 12:
                assert d not in page, (p.id, d)

