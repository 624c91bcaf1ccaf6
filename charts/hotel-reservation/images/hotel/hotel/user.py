"""user: checks a username and password against PostgreSQL."""

from aiohttp import web

from svckit import postgres, telemetry, web as svcweb
from hotel import data

SERVICE = "user"


async def check(request: web.Request) -> web.Response:
    rows = await postgres.fetch(request.app, SERVICE, "check_user",
                                "SELECT password_sha256 FROM users WHERE username = $1",
                                request.query["username"])
    ok = bool(rows) and rows[0]["password_sha256"] == data.password_hash(request.query["password"])
    return web.json_response({"correct": ok})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, data.USER)
    app.router.add_get("/check", check)
    svcweb.run(app)
