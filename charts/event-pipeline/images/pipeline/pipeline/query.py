"""query: a user's summary, from the Redis cache or else PostgreSQL (then cached for CACHE_TTL_SECONDS)."""

import json
import logging

from aiohttp import web

from svckit import config, postgres, redis_store, telemetry, web as svcweb
from pipeline import schema

SERVICE = "query"


async def summary(request: web.Request) -> web.Response:
    app, user = request.app, request.match_info["user"]
    key = schema.cache_key(user)
    try:
        cached = await redis_store.call(app, SERVICE, "GET", key)
    except Exception as e:  # noqa: BLE001 - the cache is optional for correctness: read the database
        telemetry.log(logging.getLogger(SERVICE), logging.WARNING, "cache read failed", error=f"{type(e).__name__}: {e}")
        cached = None
    if cached is not None:
        telemetry.CACHE_OPS.labels(SERVICE, "summaries", "hit").inc()
        return web.json_response(json.loads(cached))
    telemetry.CACHE_OPS.labels(SERVICE, "summaries", "miss").inc()
    rows = await postgres.fetch(app, SERVICE, "read_summary",
                                "SELECT events, purchases, total_value, last_event_at FROM user_summary"
                                " WHERE username = $1", user)
    if rows:
        r = rows[0]
        body = {"user": user, "events": r["events"], "purchases": r["purchases"],
                "totalValue": round(r["total_value"], 2),
                "lastEventAt": r["last_event_at"].isoformat() if r["last_event_at"] else None}
    else:
        body = {"user": user, "events": 0, "purchases": 0, "totalValue": 0.0, "lastEventAt": None}
    try:
        await redis_store.call(app, SERVICE, "SET", key, json.dumps(body), "EX", config.integer("CACHE_TTL_SECONDS", 30))
    except Exception:  # noqa: BLE001 - counted by redis_store.call; the answer is still right
        pass
    return web.json_response(body)


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, schema.setup)
    redis_store.attach(app)
    app.router.add_get("/users/{user}/summary", summary)
    svcweb.run(app)
