"""rate: room rates of hotels, cached in memcached in front of PostgreSQL."""

from aiohttp import web

from svckit import postgres, telemetry, web as svcweb
from hotel import cache, data

SERVICE = "rate"


async def rates(request: web.Request) -> web.Response:
    ids = [int(i) for i in request.query["hotelIds"].split(",") if i]
    plans, missing = [], []
    for hotel_id in ids:
        cached = await cache.get(request.app, SERVICE, f"rate:{hotel_id}")
        if cached is None:
            missing.append(hotel_id)
        else:
            plans.append(cached)
    if missing:
        rows = await postgres.fetch(request.app, SERVICE, "rates",
                                    "SELECT hotel_id, code, room_type, bookable_rate, total_rate FROM rate_plans"
                                    " WHERE hotel_id = ANY($1::int[])", missing)
        for row in rows:
            plan = {"hotelId": row["hotel_id"], "code": row["code"], "inDate": request.query.get("inDate"),
                    "outDate": request.query.get("outDate"),
                    "roomType": {"code": row["room_type"], "bookableRate": row["bookable_rate"],
                                 "totalRate": row["total_rate"]}}
            await cache.put(request.app, SERVICE, f"rate:{row['hotel_id']}", plan)
            plans.append(plan)
    plans.sort(key=lambda p: p["roomType"]["totalRate"])
    return web.json_response({"ratePlans": plans})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, data.RATE)
    cache.attach(app, SERVICE)
    app.router.add_get("/rates", rates)
    svcweb.run(app)
