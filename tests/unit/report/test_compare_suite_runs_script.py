"""scripts/compare_suite_runs.py: two suite runs agree cell for cell on what the seed and the grades fix."""

import importlib.util
from pathlib import Path

from report_records import make_record, write_records

from sregym.core.record import TimelineEvent

SCRIPTS = Path(__file__).parents[3] / "scripts"
_spec = importlib.util.spec_from_file_location("compare_suite_runs", SCRIPTS / "compare_suite_runs.py")
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)


def fault(target: str, **params) -> TimelineEvent:
    return TimelineEvent(at=2.5, action="start", kind="fault", name="f1", injector="cm_drift", target=target,
                         params=params, done_at=3.1, ok=True)


def night(tmp_path: Path, name: str, *, namespace: str = "hotel", phases: dict | None = None,
          ttm: float = 1.0, **changes) -> Path:
    """Two cells; the first carries ``changes``; timings and the slot namespace vary freely."""
    first = {"mitigation": False, "diagnosis": False} | changes
    recs = [make_record(problem="p1", ttm_s=ttm, phases=phases or {"agent": 3.0}, **first),
            make_record(problem="p2", mitigation=False, diagnosis=False, ttm_s=ttm, phases=phases or {"agent": 3.0})]
    for r in recs:
        r.namespace = namespace
        r.timeline = [fault(f"{namespace}/deploy/geo", replicas=0)]
    out = tmp_path / name
    write_records(recs, out)
    return out


def test_runs_that_differ_only_in_times_ids_and_slot_namespace_agree(tmp_path, capsys):
    a = night(tmp_path, "serial", phases={"agent": 2.0, "prepare": 40.0}, ttm=0.4)
    b = night(tmp_path, "jobs", namespace="hotel-p1", phases={"agent": 9.0, "prepare": 71.0}, ttm=1.7)
    assert compare.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "2 cells, 0 differ: the runs agree cell for cell"
    assert "same  noop/p1/seed0/quiet: status=completed mitigation=False" in out


def test_a_different_grade_seeded_param_or_missing_cell_is_reported(tmp_path, capsys):
    a = night(tmp_path, "serial")
    b = night(tmp_path, "graded", mitigation=True)
    assert compare.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "DIFF  noop/p1/seed0/quiet" in out and "facts.mitigation: A=False B=True" in out
    assert out.splitlines()[-1] == "2 cells, 1 differ"

    c = night(tmp_path, "reseeded")
    rec = next(c.rglob("*p1*.json"))
    rec.write_text(rec.read_text().replace('"replicas":0', '"replicas":1').replace('"replicas": 0', '"replicas": 1'))
    assert compare.main([str(a), str(c)]) == 1
    assert "timeline" in capsys.readouterr().out

    d = tmp_path / "half"
    write_records([make_record(problem="p1", mitigation=False, diagnosis=False, ttm_s=1.0,
                               phases={"agent": 3.0})], d)
    assert compare.main([str(a), str(d)]) == 1
    assert "DIFF  noop/p2/seed0/quiet: only in A" in capsys.readouterr().out


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    a = night(tmp_path, "serial")
    assert compare.main([str(a), str(tmp_path / "nope")]) == 2
    assert "not a results directory" in capsys.readouterr().err
    (tmp_path / "empty1").mkdir()
    (tmp_path / "empty2").mkdir()
    assert compare.main([str(tmp_path / "empty1"), str(tmp_path / "empty2")]) == 2
    assert "neither directory holds a run record" in capsys.readouterr().err
