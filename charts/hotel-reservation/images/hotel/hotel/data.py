"""Each service owns its tables: created and seeded on first start (DeathStarBench's data set:
80 hotels around San Francisco, users Cornell_0..Cornell_500)."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only in annotations: the load generator reads the data set without a driver
    import asyncpg

HOTELS = 80
USERS = 501


def hotel_location(i: int) -> tuple[float, float]:
    return 37.7835 + (i % 10) * 0.002 - 0.01, -122.41 + (i // 10) * 0.003 - 0.012


def password_hash(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


def owned_tables(ddl: str, seed: Callable[[asyncpg.Connection], Awaitable[None]], table: str):
    """A schema setup that creates ``ddl`` and seeds ``table`` once, safe when replicas race."""

    async def setup(conn: asyncpg.Connection) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", table)
            await conn.execute(ddl)
            if await conn.fetchval(f"SELECT count(*) FROM {table}") == 0:  # noqa: S608 - fixed table names
                await seed(conn)

    return setup


async def _seed_hotels(conn: asyncpg.Connection) -> None:
    await conn.executemany("INSERT INTO hotels (id, lat, lon) VALUES ($1, $2, $3)",
                           [(i, *hotel_location(i)) for i in range(1, HOTELS + 1)])


async def _seed_profiles(conn: asyncpg.Connection) -> None:
    await conn.executemany(
        "INSERT INTO profiles (id, name, phone, description, street, city, lat, lon) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
        [(i, f"St. Regis {i}", f"(415) 284-{4000 + i}", f"Hotel {i}: rooms with a view of the bay.",
          f"{100 + i} Market St", "San Francisco", *hotel_location(i)) for i in range(1, HOTELS + 1)])


async def _seed_rates(conn: asyncpg.Connection) -> None:
    await conn.executemany(
        "INSERT INTO rate_plans (hotel_id, code, room_type, bookable_rate, total_rate) VALUES ($1,$2,$3,$4,$5)",
        [(i, f"RACK{i % 3}", ("KNG", "QN", "DBL")[i % 3], 100.0 + (i * 37) % 200, 120.0 + (i * 37) % 200)
         for i in range(1, HOTELS + 1)])


async def _seed_scores(conn: asyncpg.Connection) -> None:
    await conn.executemany(
        "INSERT INTO hotel_scores (id, lat, lon, rating, price) VALUES ($1,$2,$3,$4,$5)",
        [(i, *hotel_location(i), 1.0 + (i * 7) % 40 / 10, 100.0 + (i * 37) % 200) for i in range(1, HOTELS + 1)])


async def _seed_users(conn: asyncpg.Connection) -> None:
    await conn.executemany("INSERT INTO users (username, password_sha256) VALUES ($1, $2)",
                           [(f"Cornell_{i}", password_hash(str(i) * 10)) for i in range(USERS)])


async def _seed_capacity(conn: asyncpg.Connection) -> None:
    await conn.executemany("INSERT INTO capacity (hotel_id, rooms) VALUES ($1, $2)",
                           [(i, 200 if i > 6 else 2000) for i in range(1, HOTELS + 1)])


GEO = owned_tables("CREATE TABLE IF NOT EXISTS hotels (id int PRIMARY KEY, lat float8, lon float8)",
                   _seed_hotels, "hotels")
PROFILE = owned_tables(
    "CREATE TABLE IF NOT EXISTS profiles (id int PRIMARY KEY, name text, phone text, description text,"
    " street text, city text, lat float8, lon float8)", _seed_profiles, "profiles")
RATE = owned_tables(
    "CREATE TABLE IF NOT EXISTS rate_plans (hotel_id int PRIMARY KEY, code text, room_type text,"
    " bookable_rate float8, total_rate float8)", _seed_rates, "rate_plans")
RECOMMENDATION = owned_tables(
    "CREATE TABLE IF NOT EXISTS hotel_scores (id int PRIMARY KEY, lat float8, lon float8, rating float8,"
    " price float8)", _seed_scores, "hotel_scores")
USER = owned_tables("CREATE TABLE IF NOT EXISTS users (username text PRIMARY KEY, password_sha256 text NOT NULL)",
                    _seed_users, "users")
RESERVATION = owned_tables(
    "CREATE TABLE IF NOT EXISTS capacity (hotel_id int PRIMARY KEY, rooms int NOT NULL);"
    " CREATE TABLE IF NOT EXISTS reservations (id bigserial PRIMARY KEY, hotel_id int NOT NULL,"
    " customer text NOT NULL, in_date date NOT NULL, out_date date NOT NULL, rooms int NOT NULL,"
    " created_at timestamptz DEFAULT now());"
    " CREATE INDEX IF NOT EXISTS reservations_hotel ON reservations (hotel_id, in_date)",
    _seed_capacity, "capacity")
