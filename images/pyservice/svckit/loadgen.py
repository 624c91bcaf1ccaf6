"""An open-loop load generator: requests start on a fixed schedule whatever the answers do.

The mix (endpoint -> weight) and rate come from LOADGEN_MIX and LOADGEN_RPS. Client-side outcomes
and latency are exported as ``loadgen_requests_total`` and ``loadgen_latency_seconds``; those are
what an app's SLOs are measured on. ``POST /rate?rps=N`` changes the rate while running.

An answer counts as ``ok`` only when its status is one the call expects *and* its content is what
a working app answers to that request (``Call.check``, :mod:`svckit.answers`); one that is not
is counted as ``wrong_answer``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import Counter, Gauge, Histogram

from svckit import config, telemetry, web as svcweb
from svckit.answers import Check, wrong_answer

REQUESTS = Counter("loadgen_requests_total", "Requests the load generator sent, by outcome",
                   ["app", "endpoint", "outcome"])
LATENCY = Histogram("loadgen_latency_seconds", "Client-side latency of answered requests",
                    ["app", "endpoint"], buckets=telemetry.LATENCY_BUCKETS)
TARGET_RPS = Gauge("loadgen_target_rps", "Configured request rate", ["app"])
IN_FLIGHT = Gauge("loadgen_in_flight", "Requests sent and not yet answered", ["app"])


@dataclass
class Call:
    """One request of the mix, built fresh for each send (``check`` knows its parameters)."""

    method: str
    path: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    ok_statuses: tuple[int, ...] = (200, 201)
    check: Check | None = None


def outcome_of(status: int, ok_statuses: tuple[int, ...]) -> str:
    """Classify an answer: ok, client_error (4xx), server_error (5xx) or unexpected."""
    if status in ok_statuses:
        return "ok"
    if 400 <= status < 500:
        return "client_error"
    if status >= 500:
        return "server_error"
    return "unexpected"


def parse_mix(raw: str, known: dict[str, Endpoint]) -> dict[str, float]:
    """Parse LOADGEN_MIX (JSON object endpoint -> weight) and check it names known endpoints."""
    mix = json.loads(raw)
    unknown = sorted(set(mix) - set(known))
    if unknown or not mix or any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0:
        raise SystemExit(f"LOADGEN_MIX must weigh known endpoints {sorted(known)}; got {raw}")
    return {k: float(v) for k, v in mix.items() if v > 0}


class LoadGenerator:
    def __init__(self, app_name: str, endpoints: dict[str, Endpoint], default_mix: dict[str, float]) -> None:
        self.app_name = app_name
        self.endpoints = endpoints
        self.target = "http://" + config.text("TARGET_ADDR")
        self.rps = config.number("LOADGEN_RPS", 5.0)
        self.timeout = config.number("LOADGEN_TIMEOUT_SECONDS", 5.0)
        self.max_in_flight = config.integer("LOADGEN_MAX_IN_FLIGHT", 200)
        self.mix = parse_mix(config.text("LOADGEN_MIX", json.dumps(default_mix)), endpoints)
        self.rng = random.Random(config.integer("LOADGEN_SEED", 0))
        self.in_flight = 0
        self.log = logging.getLogger("loadgen")
        TARGET_RPS.labels(app_name).set(self.rps)

    async def _send(self, session: aiohttp.ClientSession, name: str, call: Call) -> None:
        rid = uuid.uuid4().hex
        started = time.perf_counter()
        why = None
        try:
            async with session.request(call.method, self.target + call.path, headers={"X-Request-ID": rid},
                                       timeout=aiohttp.ClientTimeout(total=self.timeout), **call.kwargs) as r:
                body = await r.read()
                outcome = outcome_of(r.status, call.ok_statuses)
                LATENCY.labels(self.app_name, name).observe(time.perf_counter() - started)
                why = wrong_answer(call.check, r.status, body) if outcome == "ok" else None
                if why:
                    outcome = "wrong_answer"
        except asyncio.TimeoutError:
            outcome = "timeout"
        except aiohttp.ClientError:
            outcome = "connect_error"
        finally:
            self.in_flight -= 1
            IN_FLIGHT.labels(self.app_name).set(self.in_flight)
        REQUESTS.labels(self.app_name, name, outcome).inc()
        if outcome != "ok":
            telemetry.log(self.log, logging.WARNING, "request failed", endpoint=name, outcome=outcome,
                          request_id=rid, **({"why": why} if outcome == "wrong_answer" else {}))

    async def run(self, _app: web.Application):
        """Start the open loop as an aiohttp cleanup context."""
        # like the services' clients (svckit.client): a new connection per request, so users see
        # a change to the frontend's Service at once (LOADGEN_KEEPALIVE=1 pools connections)
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(
            limit=self.max_in_flight, force_close=not config.flag("LOADGEN_KEEPALIVE", False)))
        names, weights = list(self.mix), list(self.mix.values())

        async def loop() -> None:
            next_at = time.monotonic()
            while True:
                next_at += 1.0 / self.rps if self.rps > 0 else 1.0
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                if self.rps <= 0:
                    continue
                name = self.rng.choices(names, weights)[0]
                if self.in_flight >= self.max_in_flight:
                    REQUESTS.labels(self.app_name, name, "dropped").inc()
                    continue
                self.in_flight += 1
                asyncio.ensure_future(self._send(session, name, self.endpoints[name](self.rng)))

        task = asyncio.ensure_future(loop())
        yield
        task.cancel()
        await session.close()

    async def set_rate(self, request: web.Request) -> web.Response:
        self.rps = float(request.query["rps"])
        TARGET_RPS.labels(self.app_name).set(self.rps)
        return web.json_response({"rps": self.rps})


def main(app_name: str, endpoints: dict[str, Endpoint], default_mix: dict[str, float]) -> None:
    """Run the load generator for ``app_name`` with its endpoint builders and default mix."""
    telemetry.setup("loadgen")
    generator = LoadGenerator(app_name, endpoints, default_mix)
    app = svcweb.make_app("loadgen")
    app.router.add_post("/rate", generator.set_rate)
    app.cleanup_ctx.append(generator.run)
    svcweb.run(app)
