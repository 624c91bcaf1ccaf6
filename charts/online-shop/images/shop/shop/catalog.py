"""The shop's tables, created and seeded once by the API (products with stock, orders), and the
order archives: each shopper's past orders as a gzipped JSON export kept in a PostgreSQL large
object, written once when the database is new and only read afterwards (cold data)."""

from __future__ import annotations

import gzip
import json
import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only in annotations: the load generator reads the catalog without a driver
    import asyncpg

PRODUCTS = [
    ("OLJCESPC7Z", "Sunglasses", 1999), ("66VCHSJNUP", "Tank Top", 1899), ("1YMWWN1N4O", "Watch", 10999),
    ("L9ECAV7KIM", "Loafers", 8999), ("2ZYFJ3GM2N", "Hairdryer", 2499), ("0PUK6V6EV0", "Candle Holder", 1899),
    ("LS4PSXUNUM", "Salt & Pepper Shakers", 1849), ("9SIQT8TOJO", "Bamboo Glass Jar", 599),
    ("6E92ZMYYFZ", "Mug", 899),
]
SHOPPERS = [f"shopper-{i}" for i in range(50)]
ARCHIVED_ORDERS_PER_SHOPPER = 800

SCHEMA = """
CREATE TABLE IF NOT EXISTS products (id text PRIMARY KEY, name text NOT NULL, price_cents int NOT NULL,
                                     stock int NOT NULL);
CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, customer text NOT NULL, items jsonb NOT NULL,
                                   total_cents int NOT NULL, status text NOT NULL DEFAULT 'pending',
                                   created_at timestamptz DEFAULT now(), fulfilled_at timestamptz);
CREATE TABLE IF NOT EXISTS order_archives (customer text PRIMARY KEY, export oid NOT NULL, orders int NOT NULL);
"""


def archive_export(customer: str) -> bytes:
    """The customer's archived orders (2019-2023) as gzipped JSON; the same bytes on every install."""
    rng = random.Random(f"archive:{customer}")
    orders = []
    for n in range(ARCHIVED_ORDERS_PER_SHOPPER):
        items = [{"productId": pid, "quantity": rng.randint(1, 3), "priceCents": price}
                 for pid, _, price in rng.sample(PRODUCTS, rng.randint(1, 4))]
        orders.append({"id": f"A{rng.getrandbits(48):012x}", "placedAt": f"20{19 + n * 5 // ARCHIVED_ORDERS_PER_SHOPPER}-"
                       f"{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", "items": items,
                       "totalCents": sum(i["quantity"] * i["priceCents"] for i in items), "status": "delivered"})
    return gzip.compress(json.dumps(orders, separators=(",", ":")).encode(), mtime=0)


async def setup(conn: asyncpg.Connection) -> None:
    """Create the tables and seed the products and order archives once, safe when replicas race."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('products'))")
        await conn.execute(SCHEMA)
        if await conn.fetchval("SELECT count(*) FROM products") == 0:
            await conn.executemany("INSERT INTO products (id, name, price_cents, stock) VALUES ($1, $2, $3, $4)",
                                   [(pid, name, price, 1_000_000) for pid, name, price in PRODUCTS])
        archived = await conn.fetchval("SELECT count(*) FROM order_archives") == 0
        if archived:
            for customer in SHOPPERS:
                await conn.execute("INSERT INTO order_archives (customer, export, orders) "
                                   "VALUES ($1, lo_from_bytea(0, $2), $3)",
                                   customer, archive_export(customer), ARCHIVED_ORDERS_PER_SHOPPER)
    if archived:
        # Archives are never written again: freeze them and flush them now, so no later vacuum,
        # hint-bit update or checkpoint rewrites their pages (they stay as first written).
        await conn.execute("VACUUM (FREEZE) pg_largeobject, pg_largeobject_metadata, order_archives")
        await conn.execute("CHECKPOINT")
