"""reservation: books rooms when the hotel has capacity for the dates (PostgreSQL, counts cached)."""

import datetime

from aiohttp import web

from svckit import postgres, telemetry, web as svcweb
from hotel import cache, data

SERVICE = "reservation"


async def reserve(request: web.Request) -> web.Response:
    body = await request.json()
    hotel_id, rooms = int(body["hotelId"]), int(body.get("number", 1))
    in_date = datetime.date.fromisoformat(body["inDate"])
    out_date = datetime.date.fromisoformat(body["outDate"])
    key = f"booked:{hotel_id}:{in_date}:{out_date}"
    booked = await cache.get(request.app, SERVICE, key)
    if booked is None:
        rows = await postgres.fetch(request.app, SERVICE, "booked_rooms",
                                    "SELECT coalesce(sum(rooms), 0) AS n FROM reservations WHERE hotel_id = $1"
                                    " AND in_date < $3 AND out_date > $2", hotel_id, in_date, out_date)
        booked = int(rows[0]["n"])
    capacity = await postgres.fetch(request.app, SERVICE, "capacity",
                                    "SELECT rooms FROM capacity WHERE hotel_id = $1", hotel_id)
    if not capacity:
        raise web.HTTPNotFound(text=f"no hotel {hotel_id}")
    if booked + rooms > capacity[0]["rooms"]:
        return web.json_response({"hotelIds": []})
    await postgres.fetch(request.app, SERVICE, "book",
                         "INSERT INTO reservations (hotel_id, customer, in_date, out_date, rooms)"
                         " VALUES ($1, $2, $3, $4, $5)", hotel_id, body["customerName"], in_date, out_date, rooms)
    await cache.put(request.app, SERVICE, key, booked + rooms)
    return web.json_response({"hotelIds": [hotel_id]})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, data.RESERVATION)
    cache.attach(app, SERVICE)
    app.router.add_post("/reserve", reserve)
    svcweb.run(app)
