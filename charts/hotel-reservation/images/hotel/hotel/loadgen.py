"""The hotel workload: DeathStarBench's mixed workload (search, recommend, login, reserve)."""

import random

from svckit import loadgen
from svckit.loadgen import Call


def _point(rng: random.Random) -> dict:
    return {"lat": f"{37.7835 + rng.uniform(-0.01, 0.01):.4f}", "lon": f"{-122.41 + rng.uniform(-0.012, 0.012):.4f}"}


def _dates(rng: random.Random) -> dict:
    day = rng.randint(9, 23)
    return {"inDate": f"2015-04-{day:02d}", "outDate": f"2015-04-{day + rng.randint(1, 5):02d}"}


def _user(rng: random.Random) -> dict:
    i = rng.randint(0, 500)
    return {"username": f"Cornell_{i}", "password": str(i) * 10}


ENDPOINTS = {
    "search": lambda rng: Call("GET", "/hotels", {"params": {**_dates(rng), **_point(rng)}}),
    "recommend": lambda rng: Call("GET", "/recommendations", {
        "params": {"require": rng.choice(["dis", "rate", "price"]), **_point(rng)}}),
    "login": lambda rng: Call("POST", "/user", {"params": _user(rng)}),
    # a full hotel answers 409: that is the site working, not failing
    "reserve": lambda rng: Call("POST", "/reservation", {"params": {
        **_dates(rng), **_point(rng), **_user(rng), "hotelId": str(rng.randint(1, 80)),
        "customerName": "Cornell", "number": "1"}}, ok_statuses=(200, 409)),
}
# DeathStarBench mixed-workload proportions, with more writes so the database sees them
DEFAULT_MIX = {"search": 0.6, "recommend": 0.3, "login": 0.05, "reserve": 0.05}


def main() -> None:
    loadgen.main("hotel-reservation", ENDPOINTS, DEFAULT_MIX)
