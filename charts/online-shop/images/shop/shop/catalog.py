"""The shop's tables, created and seeded once by the API (products with stock, orders)."""

import asyncpg

PRODUCTS = [
    ("OLJCESPC7Z", "Sunglasses", 1999), ("66VCHSJNUP", "Tank Top", 1899), ("1YMWWN1N4O", "Watch", 10999),
    ("L9ECAV7KIM", "Loafers", 8999), ("2ZYFJ3GM2N", "Hairdryer", 2499), ("0PUK6V6EV0", "Candle Holder", 1899),
    ("LS4PSXUNUM", "Salt & Pepper Shakers", 1849), ("9SIQT8TOJO", "Bamboo Glass Jar", 599),
    ("6E92ZMYYFZ", "Mug", 899),
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS products (id text PRIMARY KEY, name text NOT NULL, price_cents int NOT NULL,
                                     stock int NOT NULL);
CREATE TABLE IF NOT EXISTS orders (id bigserial PRIMARY KEY, customer text NOT NULL, items jsonb NOT NULL,
                                   total_cents int NOT NULL, status text NOT NULL DEFAULT 'pending',
                                   created_at timestamptz DEFAULT now(), fulfilled_at timestamptz);
"""


async def setup(conn: asyncpg.Connection) -> None:
    """Create the tables and seed the products once, safe when replicas race."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('products'))")
        await conn.execute(SCHEMA)
        if await conn.fetchval("SELECT count(*) FROM products") == 0:
            await conn.executemany("INSERT INTO products (id, name, price_cents, stock) VALUES ($1, $2, $3, $4)",
                                   [(pid, name, price, 1_000_000) for pid, name, price in PRODUCTS])
