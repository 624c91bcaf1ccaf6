"""The hotel workload: DeathStarBench's mixed workload (search, recommend, login, reserve).

Each answer is checked for what the site answers to that request (:mod:`hotel.answers`)."""

import random

from svckit import loadgen
from svckit.loadgen import Call
from hotel.answers import hotels_listed, says


def _point(rng: random.Random) -> dict:
    return {"lat": f"{37.7835 + rng.uniform(-0.01, 0.01):.4f}", "lon": f"{-122.41 + rng.uniform(-0.012, 0.012):.4f}"}


def _at(point: dict) -> tuple[float, float]:
    return float(point["lat"]), float(point["lon"])


def _dates(rng: random.Random) -> dict:
    day = rng.randint(9, 23)
    return {"inDate": f"2015-04-{day:02d}", "outDate": f"2015-04-{day + rng.randint(1, 5):02d}"}


def _user(rng: random.Random) -> dict:
    i = rng.randint(0, 500)
    return {"username": f"Cornell_{i}", "password": str(i) * 10}


def search(rng: random.Random) -> Call:
    dates, point = _dates(rng), _point(rng)
    return Call("GET", "/hotels", {"params": {**dates, **point}}, check=hotels_listed(_at(point)))


def recommend(rng: random.Random) -> Call:
    require, point = rng.choice(["dis", "rate", "price"]), _point(rng)
    # by rating or price the list does not depend on the point
    return Call("GET", "/recommendations", {"params": {"require": require, **point}},
                check=hotels_listed(_at(point) if require == "dis" else None))


ENDPOINTS = {
    "search": search,
    "recommend": recommend,
    "login": lambda rng: Call("POST", "/user", {"params": _user(rng)}, check=says("login successful")),
    # a full hotel answers 409: that is the site working, not failing
    "reserve": lambda rng: Call("POST", "/reservation", {"params": {
        **_dates(rng), **_point(rng), **_user(rng), "hotelId": str(rng.randint(1, 80)),
        "customerName": "Cornell", "number": "1"}}, ok_statuses=(200, 409),
        check=says("reservation successful", "no rooms left for these dates")),
}
# DeathStarBench mixed-workload proportions, with more writes so the database sees them
DEFAULT_MIX = {"search": 0.6, "recommend": 0.3, "login": 0.05, "reserve": 0.05}


def main() -> None:
    loadgen.main("hotel-reservation", ENDPOINTS, DEFAULT_MIX)
