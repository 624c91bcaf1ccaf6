"""frontend: the public HTTP API of the hotel reservation site."""

from aiohttp import web

from svckit import client, telemetry, web as svcweb

SERVICE = "frontend"


async def _profiles(request: web.Request, ids: list[int]) -> web.Response:
    if not ids:
        return web.json_response({"hotels": []})
    found = await client.downstream(request, "profile").call(
        "GET", "/profiles", params={"hotelIds": ",".join(map(str, ids))})
    return web.json_response(found)


async def hotels(request: web.Request) -> web.Response:
    q = request.query
    params = {k: q[k] for k in ("inDate", "outDate", "lat", "lon")}
    found = await client.downstream(request, "search").call("GET", "/nearby", params=params)
    return await _profiles(request, found["hotelIds"])


async def recommendations(request: web.Request) -> web.Response:
    q = request.query
    found = await client.downstream(request, "recommendation").call(
        "GET", "/recommend", params={"require": q.get("require", "dis"), "lat": q["lat"], "lon": q["lon"]})
    return await _profiles(request, found["hotelIds"])


async def _authenticated(request: web.Request) -> bool:
    q = request.query
    answer = await client.downstream(request, "user").call(
        "GET", "/check", params={"username": q["username"], "password": q["password"]})
    return bool(answer["correct"])


async def login(request: web.Request) -> web.Response:
    if not await _authenticated(request):
        return web.json_response({"message": "wrong username or password"}, status=401)
    return web.json_response({"message": "login successful"})


async def reservation(request: web.Request) -> web.Response:
    if not await _authenticated(request):
        return web.json_response({"message": "wrong username or password"}, status=401)
    q = request.query
    booked = await client.downstream(request, "reservation").call("POST", "/reserve", json={
        "hotelId": q["hotelId"], "customerName": q["customerName"], "inDate": q["inDate"],
        "outDate": q["outDate"], "number": q.get("number", "1")})
    if not booked["hotelIds"]:
        return web.json_response({"message": "no rooms left for these dates"}, status=409)
    return web.json_response({"message": "reservation successful"})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    client.attach(app, SERVICE, ["search", "profile", "recommendation", "user", "reservation"])
    app.router.add_get("/hotels", hotels)
    app.router.add_get("/recommendations", recommendations)
    app.router.add_post("/user", login)
    app.router.add_post("/reservation", reservation)
    svcweb.run(app)
