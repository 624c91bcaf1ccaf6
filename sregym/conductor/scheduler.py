"""Play a resolved timeline against the fault plane: start and stop faults and noise at offsets.

The injection phase plays every event up to the incident onset (the last fault start) in order,
verifying each fault; the rest (fault stops such as a removed trigger, noise) plays in the
background during the agent phase. Each event is updated in place with when it happened, whether
it worked and the mechanism used, so the record shows the timeline as it ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

from sregym.conductor.faultplane import FaultPlane
from sregym.core.errors import FaultError
from sregym.core.problem import FaultSpec, Selector
from sregym.core.record import TimelineEvent
from sregym.injectors import INJECTORS


class TimelinePlayer:
    def __init__(self, plane: FaultPlane, faults: list[FaultSpec], events: list[TimelineEvent], *,
                 verify_timeout: float = 90.0, noise_params: dict[str, Any] | None = None,
                 note: Callable[[str], None] = lambda m: None):
        """``noise_params`` (e.g. ``duration``, ``exclude``) go to each noise injector that takes them."""
        self.plane = plane
        self.noise_params = noise_params or {}
        self.faults = {f.id: f for f in faults}
        self.events = events
        self.verify_timeout = verify_timeout
        self.note = note
        self.t0: float | None = None
        self._next = 0

    def _elapsed(self) -> float:
        assert self.t0 is not None
        return time.monotonic() - self.t0

    async def _fire(self, ev: TimelineEvent) -> None:
        if ev.action == "stop":
            await self.plane.stop(ev.name)
        elif ev.kind == "fault":
            f = self.faults[ev.name]
            intent = await self.plane.start(key=f.id, kind="fault", injector=f.injector, params=f.params,
                                            target=f.target, mechanism=f.mechanism)
            ev.mechanism = intent.mechanism
            check = await self.plane.verify(f.id, timeout=self.verify_timeout)
            if not check.ok:
                raise FaultError(f"fault {f.id!r} ({f.injector}) did not take effect within "
                                 f"{self.verify_timeout:.0f}s: {check.detail}",
                                 hint="the run was rolled back; check the target exists and is healthy")
            self.note(f"fault {f.id} in place ({intent.mechanism}): {check.detail}")
        else:
            accepted = INJECTORS.get(ev.injector).Params.model_fields
            params = {k: v for k, v in {**self.noise_params, **ev.params}.items() if k in accepted}
            intent = await self.plane.start(key=ev.name, kind="noise", injector=ev.injector, params=params,
                                            target=Selector(namespace=self.plane.app_namespace))
            ev.mechanism = intent.mechanism

    async def _play(self, ev: TimelineEvent, *, strict: bool) -> None:
        await anyio.sleep(max(0.0, ev.at - self._elapsed()))
        try:
            await self._fire(ev)
        except Exception as e:
            ev.done_at, ev.ok, ev.error = round(self._elapsed(), 3), False, str(e)
            # A fault that fails to start is fatal; anything else is recorded and the run goes on
            # (a failed stop is retried by the recover phase).
            if strict:
                raise
            self.note(f"{ev.kind} {ev.name} {ev.action} failed: {e}")
            return
        ev.done_at, ev.ok = round(self._elapsed(), 3), True

    def _start_clock(self) -> None:
        # events before offset 0 (noise leading in to the first fault) are played in real time too
        if self.t0 is None:
            self.t0 = time.monotonic() - min([0.0, *(e.at for e in self.events)])

    async def play_until(self, until: float) -> None:
        """Play, in order, every event at or before ``until`` (starting the clock on first call, at
        the earliest event's offset when that is negative)."""
        self._start_clock()
        while self._next < len(self.events) and self.events[self._next].at <= until:
            ev = self.events[self._next]
            self._next += 1
            await self._play(ev, strict=ev.kind == "fault")

    async def play_rest(self) -> None:
        """Play the remaining events; meant for a background task cancelled when the agent is done."""
        self._start_clock()
        while self._next < len(self.events):
            ev = self.events[self._next]
            self._next += 1
            await self._play(ev, strict=False)

    async def stop_noise(self) -> list[str]:
        """Recover every transient noise event still active (before grading, so churn does not skew
        it). Noise without a stop event (the hand edits leading in to the incident) stays until the
        recover phase, after grading: its undo would roll pods under the grade."""
        transient = {e.name for e in self.events if e.kind == "noise" and e.action == "stop"}
        errors = []
        for key, act in list(self.plane.active.items()):
            if act.intent.kind == "noise" and key in transient and not act.recovered:
                try:
                    await self.plane.stop(key)
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
        return errors
