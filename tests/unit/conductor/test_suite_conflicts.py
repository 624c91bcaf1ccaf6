"""Which suite cells may run side by side: pure functions over claims."""

from sregym.conductor.suite import (
    ANY_NODE,
    claims,
    conflict,
    free_namespace,
    SuiteRunner,
    pick_runnable,
    suite_cells,
    suite_index,
)
from sregym.core.problem import Problem
from sregym.core.settings import RunSettings


def problem(app="hotel", injector="env_var", app_namespace=None, **target) -> Problem:
    return Problem.model_validate({
        "id": "p", "title": "p", "alert": "users see errors on the search page",
        "app": {"name": app, "namespace": app_namespace},
        "faults": [{"id": "f", "injector": injector, "target": target}],
        "ground_truth": {"root_cause": "a wrong value in the config", "component": "geo", "mechanism": "m"},
        "oracles": {"mitigation": [{"name": "slo"}]}, "difficulty": "easy",
        "tags": {"layer": "application", "fault_family": "config", "failure_mode": "errors"},
    })


def node_level(injector: str) -> bool:
    return injector in ("latent_sector_error", "process_signal")


def test_an_app_fault_claims_only_its_namespace():
    assert claims(problem(), "hotel", node_level) == {"ns:hotel"}


def test_a_fault_in_another_namespace_claims_that_namespace_too():
    assert claims(problem(app_namespace="hotel", namespace="kube-system", kind="Deployment"), "hotel",
                  node_level) == {"ns:hotel", "ns:kube-system"}


def test_a_node_level_fault_claims_its_node_or_any_node():
    assert claims(problem(injector="latent_sector_error", node="worker-1"), "hotel", node_level) == {
        "ns:hotel", "node:worker-1"}
    assert ANY_NODE in claims(problem(injector="process_signal"), "hotel", node_level)
    assert "node:n2" in claims(problem(kind="Node", name="n2"), "hotel", node_level)


def test_conflicts_by_shared_claim_and_by_any_node():
    assert conflict(frozenset({"ns:a"}), frozenset({"ns:a", "node:x"}))
    assert not conflict(frozenset({"ns:a", "node:x"}), frozenset({"ns:b", "node:y"}))
    assert conflict(frozenset({"ns:a", ANY_NODE}), frozenset({"ns:b", "node:y"}))
    assert not conflict(frozenset({"ns:a", ANY_NODE}), frozenset({"ns:b"}))


def test_pick_runnable_fills_free_slots_in_order_without_conflicts():
    a, a2, b, n1, n2 = (frozenset(s) for s in (
        {"ns:a"}, {"ns:a"}, {"ns:b"}, {"ns:c", ANY_NODE}, {"ns:d", "node:x"}))
    assert pick_runnable([a, a2, b, n1, n2], [], 3) == [0, 2, 3]
    assert pick_runnable([a, a2, b, n1, n2], [frozenset({"ns:b", "node:x"})], 5) == [0]
    assert pick_runnable([a], [], 0) == []
    assert pick_runnable([n1], [], 1) == [0]  # with nothing running, the first cell always starts


def test_a_busy_namespace_gives_the_next_slot_namespace():
    assert free_namespace("hotel", [], 3) == "hotel"
    assert free_namespace("hotel", ["hotel"], 3) == "hotel-p1"
    assert free_namespace("hotel", ["hotel", "hotel-p1", "hotel-p2"], 3) is None


def test_cells_cover_problems_seeds_and_noise_and_resume_skips_finished(tmp_path):
    cells = suite_cells(["p1", "p2"], RunSettings(agent="noop"), [0, 1], [True, False])
    assert len(cells) == 8 and cells[0].key == ("noop", "p1", 0, True)
    (tmp_path / "r1.json").write_text("{}")
    (tmp_path / "r2.json").write_text("{}")
    entries = [
        {"agent": "noop", "problem_id": "p1", "seed": 0, "noise": True, "status": "completed", "record": "r1.json"},
        {"agent": "noop", "problem_id": "p1", "seed": 1, "noise": True, "status": "error", "record": "r2.json"},
        {"agent": "noop", "problem_id": "p1", "seed": 0, "noise": False, "status": "aborted", "record": "r2.json"},
        {"agent": "noop", "problem_id": "p2", "seed": 0, "noise": True, "status": "completed", "record": "gone.json"},
        {"agent": "other", "problem_id": "p2", "seed": 1, "noise": True, "status": "completed", "record": "r1.json"},
    ]
    for e in entries:
        suite_index(tmp_path).append(e)

    def todo(retry_errors: bool = False) -> list:
        problems = [problem().model_copy(update={"id": pid}) for pid in ("p1", "p2")]
        runner = SuiteRunner(problems, suite="s", settings=RunSettings(agent="noop"), seeds=[0, 1],
                             noise=[True, False], out_dir=tmp_path, run_fn=lambda *a, **k: None,
                             retry_errors=retry_errors)
        return [c.key for c in runner.pending(resume=True)]

    assert ("noop", "p1", 0, True) not in todo()
    assert ("noop", "p1", 1, True) not in todo()  # an error cell is finished
    assert ("noop", "p1", 0, False) in todo()  # an aborted one is not
    assert ("noop", "p2", 0, True) in todo()  # its record file is gone
    assert len(todo()) == 6
    assert len(todo(retry_errors=True)) == 7


def test_node_level_noise_claims_any_node_only_when_noise_is_on():
    p = problem()
    p.noise.types = ["cpu_burst", "pod_restart"]

    def level(name: str) -> bool:
        return name == "noise_cpu_burst"

    assert ANY_NODE in claims(p, "hotel", level, noise=True)
    assert ANY_NODE not in claims(p, "hotel", level, noise=False)
    p.noise.types = ["pod_restart"]
    assert ANY_NODE not in claims(p, "hotel", level, noise=True)
    p.noise.types, p.noise.per_window = ["cpu_burst"], 0  # noise switched off in the problem
    assert ANY_NODE not in claims(p, "hotel", level, noise=True)


def test_the_eta_is_the_mean_cell_time_times_the_cells_left():
    from sregym.conductor.suite import eta_seconds

    assert eta_seconds(600.0, 3, 12) == 1800.0
    assert eta_seconds(0.0, 0, 12) is None
    assert eta_seconds(100.0, 12, 12) == 0.0
