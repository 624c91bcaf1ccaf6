"""api: catalog (PostgreSQL behind a Redis cache), carts (Redis), orders (PostgreSQL, then queued
to NATS for the workers) and each shopper's order history (archive exports in PostgreSQL).

CART_PRICE_REFRESH makes the cart view re-read current prices from the database instead of the
cached catalog; CATALOG_SORT_BY_NAME lists products by name instead of id; CART_ITEMS_SORTED lists
cart items by product id."""

import gzip
import json
import logging

from aiohttp import web
from opentelemetry import propagate, trace

from svckit import config, jetstream, postgres, redis_store, telemetry, web as svcweb
from shop import catalog, stores

SERVICE = "api"


async def _products(app: web.Application) -> list[dict]:
    try:
        cached = await redis_store.call(app, SERVICE, "GET", "catalog:products")
    except Exception as e:  # noqa: BLE001 - the cache is an optimisation: fall back to the database
        telemetry.CACHE_OPS.labels(SERVICE, "redis", "error").inc()
        telemetry.log(logging.getLogger(SERVICE), logging.WARNING, "cache read failed", error=f"{type(e).__name__}: {e}")
        cached = None
    telemetry.CACHE_OPS.labels(SERVICE, "redis", "hit" if cached else "miss").inc()
    if cached:
        return json.loads(cached)
    rows = await postgres.fetch(app, SERVICE, "list_products", "SELECT id, name, price_cents, stock FROM products ORDER BY id")
    products = [dict(r) for r in rows]
    try:
        await redis_store.call(app, SERVICE, "SET", "catalog:products", json.dumps(products),
                                "EX", config.integer("CATALOG_CACHE_TTL_SECONDS", 30))
    except Exception:  # noqa: BLE001 - counted by redis_call; the answer is still good
        pass
    return products


async def list_products(request: web.Request) -> web.Response:
    products = await _products(request.app)
    if config.flag("CATALOG_SORT_BY_NAME"):
        products = sorted(products, key=lambda p: p["name"])
    return web.json_response({"products": products})


async def get_product(request: web.Request) -> web.Response:
    for product in await _products(request.app):
        if product["id"] == request.match_info["id"]:
            return web.json_response(product)
    raise web.HTTPNotFound(text="no such product")


async def add_to_cart(request: web.Request) -> web.Response:
    body = await request.json()
    user = request.match_info["user"]
    await redis_store.call(request.app, SERVICE, "HINCRBY", f"cart:{user}", body["productId"], int(body.get("quantity", 1)))
    await redis_store.call(request.app, SERVICE, "EXPIRE", f"cart:{user}", config.integer("CART_TTL_SECONDS", 3600))
    return web.json_response({"ok": True}, status=201)


async def _cart(request: web.Request, user: str) -> list[dict]:
    raw = await redis_store.call(request.app, SERVICE, "HGETALL", f"cart:{user}")
    pairs = dict(zip(raw[::2], raw[1::2])) if isinstance(raw, list) else raw
    if config.flag("CART_PRICE_REFRESH"):
        conn = await request.app[postgres.POOL].acquire(timeout=config.number("DB_ACQUIRE_TIMEOUT_SECONDS", 2.0))
        rows = await conn.fetch("SELECT id, price_cents FROM products WHERE id = ANY($1::text[])", list(pairs))
        prices = {r["id"]: r["price_cents"] for r in rows}
        if len(prices) < len(pairs):
            await request.app[postgres.POOL].release(conn)
    else:
        prices = {p["id"]: p["price_cents"] for p in await _products(request.app)}
    items = [{"productId": pid, "quantity": int(q), "priceCents": prices.get(pid, 0)} for pid, q in pairs.items()]
    return sorted(items, key=lambda i: i["productId"]) if config.flag("CART_ITEMS_SORTED") else items


async def view_cart(request: web.Request) -> web.Response:
    items = await _cart(request, request.match_info["user"])
    return web.json_response({"items": items, "totalCents": sum(i["quantity"] * i["priceCents"] for i in items)})


async def checkout(request: web.Request) -> web.Response:
    user = request.match_info["user"]
    items = await _cart(request, user)
    if not items:
        return web.json_response({"message": "cart is empty"}, status=400)
    total = sum(i["quantity"] * i["priceCents"] for i in items)
    rows = await postgres.fetch(request.app, SERVICE, "create_order",
                                "INSERT INTO orders (customer, items, total_cents) VALUES ($1, $2::jsonb, $3) RETURNING id",
                                user, json.dumps(items), total)
    order_id = rows[0]["id"]
    headers = {"X-Request-ID": telemetry.request_id.get()}
    propagate.inject(headers)
    with trace.get_tracer(SERVICE).start_as_current_span("nats publish orders.created", kind=trace.SpanKind.PRODUCER):
        try:
            await request.app[jetstream.JETSTREAM].publish(
                stores.ORDERS_SUBJECT, json.dumps({"orderId": order_id}).encode(), headers=headers)
        except Exception:
            telemetry.DEPENDENCY_ERRORS.labels(SERVICE, "nats", "publish").inc()
            raise
    await redis_store.call(request.app, SERVICE, "DEL", f"cart:{user}")
    return web.json_response({"orderId": order_id, "totalCents": total}, status=201)


async def get_order(request: web.Request) -> web.Response:
    rows = await postgres.fetch(request.app, SERVICE, "get_order",
                                "SELECT id, status, total_cents FROM orders WHERE id = $1", int(request.match_info["id"]))
    if not rows:
        raise web.HTTPNotFound(text="no such order")
    return web.json_response(dict(rows[0]))


async def order_history(request: web.Request) -> web.Response:
    """A shopper's archived orders (the newest ten and totals), read from their archive export."""
    rows = await postgres.fetch(request.app, SERVICE, "order_history",
                                "SELECT lo_get(export) AS export FROM order_archives WHERE customer = $1",
                                request.match_info["user"])
    if not rows:
        return web.json_response({"orders": [], "count": 0, "totalCents": 0})
    orders = json.loads(gzip.decompress(rows[0]["export"]))
    return web.json_response({"orders": orders[-10:], "count": len(orders),
                              "totalCents": sum(o["totalCents"] for o in orders)})


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    postgres.attach(app, SERVICE, catalog.setup)
    redis_store.attach(app)
    jetstream.attach(app, SERVICE, stores.ORDERS)
    app.router.add_get("/products", list_products)
    app.router.add_get("/products/{id}", get_product)
    app.router.add_post("/carts/{user}/items", add_to_cart)
    app.router.add_get("/carts/{user}", view_cart)
    app.router.add_post("/carts/{user}/checkout", checkout)
    app.router.add_get("/orders/{id}", get_order)
    app.router.add_get("/customers/{user}/orders/archive", order_history)
    svcweb.run(app)
