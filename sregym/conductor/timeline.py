"""Resolve a problem's timeline: when each fault and noise event starts and stops.

Pure and seeded: the same problem, seed and noise setting give the same list of events on any
host. Offsets are seconds after the injection phase starts. A fault without ``duration`` has no
stop event: it stays until the recover phase. Noise events are drawn per window from the noise
policy with a private RNG derived from the run seed, and always stop after ``duration_seconds``.
Noise windows start when the agent phase opens (the incident onset), and the first event comes
within ``FIRST_NOISE_WITHIN`` seconds of it: background trouble is there from the first look, as
in production, so a fast agent meets it too (windows counted from the injection put the first
event anywhere in the first five minutes).

Hand edits (``manual_edit``, where the policy has it) also come as a seeded lead-in around the
incident (``lead_edits``): a real cluster has a history of `kubectl edit`s from before anything went
wrong, so the fault's edit must be neither the only one written before the page nor, by rule, the
latest. One to three come in the ``LEAD_SECONDS`` before the first fault (negative offsets: the
player starts its clock that much earlier), none to three right after the faults and before the agent
is paged, one within the agent's first minute; one of those before the page edits what faults edit
(a container's env) where it can. They have no stop event: like a fault without a duration they stay
until the recover phase, after grading (a hand edit from before the incident is still there when the
fix is graded, and undoing the env variable rolls pods, which must not happen under the grade).
"""

from __future__ import annotations

import math

from sregym.conductor.checks import noise_injector_name
from sregym.core.problem import Problem
from sregym.core.record import TimelineEvent
from sregym.core.seeds import rng

FIRST_NOISE_WITHIN = 15.0
HAND_EDIT = "manual_edit"
LEAD_SECONDS = 20.0  # how long before the first fault the earliest lead-in edit may come
EARLY_WITHIN = 45.0  # the lead-in edit after the page comes within this many seconds of the onset


def noise_event_name(noise_type: str, index: int | str) -> str:
    """Noise events are named ``<type>#<n>`` so a start and its stop pair up in the record."""
    return f"{noise_type}#{index}"


def fault_events(problem: Problem) -> list[TimelineEvent]:
    events = []
    for f in problem.faults:
        target = f.target.describe()
        events.append(TimelineEvent(at=f.at, action="start", kind="fault", name=f.id, injector=f.injector,
                                    target=target))
        if f.duration is not None:
            events.append(TimelineEvent(at=f.at + f.duration, action="stop", kind="fault", name=f.id,
                                        injector=f.injector, target=target))
    return events


def noise_events(problem: Problem, seed: int, horizon: float, start: float = 0.0) -> list[TimelineEvent]:
    """Noise over ``[start, horizon)``: ``per_window`` events in each window counted from ``start``,
    at seeded offsets; the first one within ``FIRST_NOISE_WITHIN`` seconds of ``start``."""
    policy = problem.noise
    if policy.per_window == 0 or not policy.types or horizon <= start:
        return []
    r = rng(seed, "noise", problem.id)
    events: list[TimelineEvent] = []
    n = 0
    for w in range(math.ceil((horizon - start) / policy.window_seconds)):
        window_start = start + w * policy.window_seconds
        latest = max(0.0, min(policy.window_seconds, horizon - window_start) - 1.0)
        for _ in range(policy.per_window):
            noise_type = r.choice(policy.types)
            at = round(window_start + r.uniform(0, min(FIRST_NOISE_WITHIN, latest) if n == 0 else latest), 3)
            name = noise_event_name(noise_type, n)
            injector = noise_injector_name(noise_type)
            events.append(TimelineEvent(at=at, action="start", kind="noise", name=name, injector=injector))
            events.append(TimelineEvent(at=round(at + policy.duration_seconds, 3), action="stop", kind="noise",
                                        name=name, injector=injector))
            n += 1
    return events


def lead_edits(problem: Problem, seed: int, horizon: float, onset: float) -> list[TimelineEvent]:
    """The seeded lead-in of hand edits around the incident (see the module docstring), the last
    before ``horizon``; none stops before the recover phase. Their number and order vary with the seed, so the fault's edit has no
    fixed rank among the `kubectl-edit` entries written before the page."""
    policy = problem.noise
    if policy.per_window == 0 or HAND_EDIT not in policy.types:
        return []
    r = rng(seed, "noise-lead", problem.id)
    first_fault = min((f.at for f in problem.faults), default=0.0)
    before = sorted(round(first_fault - r.uniform(1.0, LEAD_SECONDS), 3) for _ in range(r.randint(1, 3)))
    at_onset = [onset] * r.randint(0, 3)  # played after the faults (same instant: faults first)
    early = [round(onset + r.uniform(0.0, max(0.0, min(EARLY_WITHIN, horizon - onset - 1.0))), 3)]
    # one edits what faults edit, where it can: after the faults in half the runs, so the fault's is
    # the later of the two spec edits before the page no more often than the noise's
    after = at_onset and r.random() < 0.75
    spec = len(before) + r.randrange(len(at_onset)) if after else r.randrange(len(before))
    injector = noise_injector_name(HAND_EDIT)
    events = []
    for n, at in enumerate(before + at_onset + early):
        name = noise_event_name(HAND_EDIT, f"lead{n}")
        params = {"sort": "spec"} if n == spec else {}
        if at == onset:  # on the fault's object it would move only the fault's entry past the others
            params["spare_root"] = True
        events.append(TimelineEvent(at=at, action="start", kind="noise", name=name, injector=injector, params=params))
    return events


def horizon_for(problem: Problem, agent_seconds: float | None = None) -> float:
    """How long noise may run: until the last fault starts, plus the agent's wall-time budget."""
    last_start = max((f.at for f in problem.faults), default=0.0)
    return last_start + (agent_seconds if agent_seconds is not None else problem.budgets.seconds)


def resolve_timeline(problem: Problem, seed: int, noise: bool, *, agent_seconds: float | None = None
                     ) -> list[TimelineEvent]:
    """Every start and stop, sorted by time (faults before noise at the same instant; stops first)."""
    events = fault_events(problem)
    if noise:
        horizon, onset = horizon_for(problem, agent_seconds), incident_onset(events)
        events += noise_events(problem, seed, horizon, start=onset) + lead_edits(problem, seed, horizon, onset)
    order = {("stop", "noise"): 0, ("stop", "fault"): 1, ("start", "fault"): 2, ("start", "noise"): 3}
    return sorted(events, key=lambda e: (e.at, order[(e.action, e.kind)]))


def incident_onset(events: list[TimelineEvent]) -> float:
    """When the last fault has started: the agent is paged after that (metastable triggers included)."""
    return max((e.at for e in events if e.kind == "fault" and e.action == "start"), default=0.0)
