"""geo: the hotels nearest to a point, from PostgreSQL."""

from aiohttp import web

from svckit import config, postgres, telemetry, web as svcweb
from hotel import data

SERVICE = "geo"


async def near(request: web.Request) -> web.Response:
    lat, lon = float(request.query["lat"]), float(request.query["lon"])
    rows = await postgres.fetch(request.app, SERVICE, "nearby",
                                "SELECT id FROM hotels ORDER BY (lat - $1) ^ 2 + (lon - $2) ^ 2 LIMIT $3",
                                lat, lon, config.integer("GEO_NEARBY_LIMIT", 5))
    return web.json_response({"hotelIds": [r["id"] for r in rows]})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, data.GEO)
    app.router.add_get("/near", near)
    svcweb.run(app)
