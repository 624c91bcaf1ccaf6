"""web: the storefront behind the load balancer; composes pages from the API and serves the
product photos from its media volume (shop.media)."""

import asyncio
import logging

from aiohttp import web

from svckit import client, telemetry, web as svcweb
from shop import catalog, media

SERVICE = "web"


def _api(request: web.Request) -> client.Downstream:
    return client.downstream(request, "api")


async def home(request: web.Request) -> web.Response:
    user = request.query.get("user", "guest")
    products, cart = await asyncio.gather(_api(request).call("GET", "/products"),
                                          _api(request).call("GET", f"/carts/{user}"))
    return web.json_response({"products": products["products"], "cartItems": len(cart["items"])})


async def product(request: web.Request) -> web.Response:
    page = await _api(request).call("GET", f"/products/{request.match_info['id']}")
    page["image"] = await asyncio.to_thread(media.describe, page["id"])
    if page["image"] is None:
        telemetry.log(logging.getLogger(SERVICE), logging.WARNING, "product photo missing", product_id=page["id"])
    return web.json_response(page)


async def photo(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    path = media.library() / name
    if name.startswith(".") or "/" in name or not path.is_file():
        raise web.HTTPNotFound(text="no such photo")
    return web.FileResponse(path, headers={"Content-Type": "image/svg+xml", "Cache-Control": "max-age=3600"})


async def add_to_cart(request: web.Request) -> web.Response:
    body = await request.json()
    await _api(request).call("POST", f"/carts/{request.match_info['user']}/items", json=body)
    return web.json_response({"ok": True}, status=201)


async def cart(request: web.Request) -> web.Response:
    return web.json_response(await _api(request).call("GET", f"/carts/{request.match_info['user']}"))


async def checkout(request: web.Request) -> web.Response:
    user = request.match_info["user"]
    try:
        placed = await _api(request).call("POST", f"/carts/{user}/checkout")
    except client.DownstreamError as e:
        if e.status == 400:
            return web.json_response({"message": "cart is empty"}, status=400)
        raise
    return web.json_response(placed, status=201)


async def order_history(request: web.Request) -> web.Response:
    return web.json_response(await _api(request).call("GET", f"/customers/{request.match_info['user']}/orders/archive"))


def main() -> None:
    log = telemetry.setup(SERVICE)
    imported = media.import_library(catalog.PRODUCTS)
    telemetry.log(log, logging.INFO, "media library ready", path=str(media.library()), imported=imported)
    app = svcweb.make_app(SERVICE)
    client.attach(app, SERVICE, ["api"])
    svcweb.add_readiness_check(app, "media", lambda: asyncio.to_thread(media.check))
    app.router.add_get("/", home)
    app.router.add_get("/product/{id}", product)
    app.router.add_post("/cart/{user}", add_to_cart)
    app.router.add_get("/cart/{user}", cart)
    app.router.add_post("/cart/{user}/checkout", checkout)
    app.router.add_get("/account/{user}/orders", order_history)
    app.router.add_get("/media/{name}", photo)
    svcweb.run(app)
