"""search: nearby hotels (geo) that have rates for the dates (rate)."""

from aiohttp import web

from svckit import client, telemetry, web as svcweb

SERVICE = "search"


async def nearby(request: web.Request) -> web.Response:
    q = request.query
    near = await client.downstream(request, "geo").call("GET", "/near", params={"lat": q["lat"], "lon": q["lon"]})
    ids = ",".join(str(i) for i in near["hotelIds"])
    rates = await client.downstream(request, "rate").call(
        "GET", "/rates", params={"hotelIds": ids, "inDate": q["inDate"], "outDate": q["outDate"]})
    return web.json_response({"hotelIds": [p["hotelId"] for p in rates["ratePlans"]]})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    client.attach(app, SERVICE, ["geo", "rate"])
    app.router.add_get("/nearby", nearby)
    svcweb.run(app)


