"""What the hotel site answers, checked against its fixed data set (:mod:`hotel.data`): a search or
a distance recommendation lists hotels among the nearest to the point asked about, a login or a
reservation says it succeeded. An empty or fixed list from a stand-in is a wrong answer
(:mod:`svckit.answers`)."""

from __future__ import annotations

from svckit.answers import json_object
from hotel import data

# the services list the 5 nearest (geo's and recommendation's LIMIT); a few more are accepted, as
# points half-way between two hotels (the 4-decimal coordinates) may rank either first
NEAR = 8


def nearest(lat: float, lon: float, n: int = NEAR) -> set[int]:
    """The ids of the ``n`` hotels nearest to (lat, lon), as geo orders them."""
    def distance(i: int) -> float:
        h_lat, h_lon = data.hotel_location(i)
        return (h_lat - lat) ** 2 + (h_lon - lon) ** 2
    return set(sorted(range(1, data.HOTELS + 1), key=distance)[:n])


def hotels_listed(near: tuple[float, float] | None = None):
    """A check: the answer lists hotels (each with its id and name), near ``near`` when given."""
    def check(_status: int, body: bytes) -> str | None:
        hotels = json_object(body)["hotels"]
        if not isinstance(hotels, list) or not hotels:
            return "no hotels listed"
        ids = [h["id"] for h in hotels]
        if any(not isinstance(i, int) or not 1 <= i <= data.HOTELS or not h.get("name") for i, h in zip(ids, hotels)):
            return f"not hotels of the data set: {ids[:5]}"
        if near is not None and not set(ids) <= nearest(*near):
            return f"hotels {sorted(set(ids) - nearest(*near))[:5]} are not near {near}"
        return None
    return check


def says(*messages: str):
    """A check: the answer's message is one a working site gives."""
    def check(_status: int, body: bytes) -> str | None:
        message = json_object(body).get("message")
        return None if message in messages else f"message {str(message)[:60]!r}"
    return check
