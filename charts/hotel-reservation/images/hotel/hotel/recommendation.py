"""recommendation: the best hotels by distance, rating or price, from PostgreSQL.

RECOMMEND_TIEBREAK_BY_ID orders hotels that tie by id, so equal scores always list alike."""

from aiohttp import web

from svckit import config, postgres, telemetry, web as svcweb
from hotel import data

SERVICE = "recommendation"
ORDER = {"dis": "(lat - $1) ^ 2 + (lon - $2) ^ 2", "rate": "rating DESC", "price": "price"}


async def recommend(request: web.Request) -> web.Response:
    require = request.query.get("require", "dis")
    if require not in ORDER:
        raise web.HTTPBadRequest(text=f"require must be one of {sorted(ORDER)}")
    lat, lon = float(request.query["lat"]), float(request.query["lon"])
    order = ORDER[require] + (", id" if config.flag("RECOMMEND_TIEBREAK_BY_ID") else "")
    rows = await postgres.fetch(request.app, SERVICE, "recommend",
                                f"SELECT id FROM hotel_scores WHERE $1::float8 IS NOT NULL AND $2::float8 IS NOT NULL"
                                f" ORDER BY {order} LIMIT $3", lat, lon,
                                config.integer("RECOMMEND_LIMIT", 5))
    return web.json_response({"hotelIds": [r["id"] for r in rows]})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, data.RECOMMENDATION)
    app.router.add_get("/recommend", recommend)
    svcweb.run(app)
