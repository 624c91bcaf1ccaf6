"""Phase timing: durations add up per name, starts say when each phase first began (the record's
``phase_starts``), and a phase that runs alongside another shows no second spinner."""

import io
import time

from rich.console import Console

from sregym.conductor.progress import Phases


def test_starts_and_durations_show_phases_that_overlap():
    phases = Phases()
    with phases.phase("sandbox", spinner=False):
        with phases.phase("baseline"):
            time.sleep(0.05)
        time.sleep(0.02)
    with phases.phase("agent"):
        pass
    assert phases.starts["sandbox"] <= phases.starts["baseline"] < phases.starts["agent"]
    assert phases.durations["sandbox"] >= phases.durations["baseline"] >= 0.05
    assert phases.starts["agent"] >= phases.starts["sandbox"] + phases.durations["sandbox"] - 0.01


def test_a_phase_without_spinner_runs_inside_one_with_a_spinner_on_a_console():
    out = io.StringIO()
    phases = Phases(Console(file=out, force_terminal=True), label="p")
    with phases.phase("inject"):
        with phases.phase("sandbox", "alongside", spinner=False):  # two spinners would raise LiveError
            pass
    assert "sandbox alongside" in out.getvalue() and "inject" in out.getvalue()
