"""profile: hotel descriptions, cached in memcached in front of PostgreSQL.

PROFILE_CACHE_KEY_V2 switches to the v2 cache keys (scoped per request for traceability);
PROFILE_TRIM_DESCRIPTION strips surrounding white space from descriptions."""

from aiohttp import web

from svckit import config, postgres, telemetry, web as svcweb
from hotel import cache, data

SERVICE = "profile"


def cache_key(hotel_id: int) -> str:
    if config.flag("PROFILE_CACHE_KEY_V2"):
        return f"profile:v2:{hotel_id}:{telemetry.request_id.get()}"
    return f"profile:{hotel_id}"


async def profiles(request: web.Request) -> web.Response:
    ids = [int(i) for i in request.query["hotelIds"].split(",") if i]
    found, missing = {}, []
    for hotel_id in ids:
        cached = await cache.get(request.app, SERVICE, cache_key(hotel_id))
        if cached is None:
            missing.append(hotel_id)
        else:
            found[hotel_id] = cached
    if missing:
        rows = await postgres.fetch(request.app, SERVICE, "profiles",
                                    "SELECT id, name, phone, description, street, city, lat, lon FROM profiles"
                                    " WHERE id = ANY($1::int[])", missing)
        for row in rows:
            profile = {"id": row["id"], "name": row["name"], "phoneNumber": row["phone"],
                       "description": (row["description"] or "").strip()
                       if config.flag("PROFILE_TRIM_DESCRIPTION") else row["description"],
                       "address": {"street": row["street"], "city": row["city"], "lat": row["lat"], "lon": row["lon"]}}
            await cache.put(request.app, SERVICE, cache_key(row["id"]), profile)
            found[row["id"]] = profile
    return web.json_response({"hotels": [found[i] for i in ids if i in found]})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, data.PROFILE)
    cache.attach(app, SERVICE)
    app.router.add_get("/profiles", profiles)
    svcweb.run(app)
