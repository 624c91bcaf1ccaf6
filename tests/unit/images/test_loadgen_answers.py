"""The load generator counts an answer as ``ok`` only when it is what a working app gives to that
request: measured live, a stand-in answering 200 (``{}``) anywhere on the request path made every
request a fast success while the fault ran. These tests play the stand-ins an agent could write
(an empty body, an empty list, a fixed list copied from one real answer, another product's page,
another user's summary) against each app's checks, and the app's own answers, which must pass."""

import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
for folder in ("images/pyservice", "charts/hotel-reservation/images/hotel", "charts/online-shop/images/shop",
               "charts/event-pipeline/images/pipeline"):
    sys.path.insert(0, str(ROOT / folder))  # as in the images

from hotel import answers as hotel, data  # noqa: E402
from pipeline import answers as pipeline  # noqa: E402
from shop import answers as shop  # noqa: E402
from shop.catalog import PRODUCTS  # noqa: E402
from svckit.answers import wrong_answer  # noqa: E402


def body(value) -> bytes:
    return json.dumps(value).encode()


def profiles(ids) -> bytes:
    """frontend's answer: profile's hotels for ``ids``."""
    return body({"hotels": [{"id": i, "name": f"St. Regis {i}", "address": {}} for i in ids]})


def geo_nearest(lat: float, lon: float, tie_last: bool = False) -> list[int]:
    """What geo's ``ORDER BY distance LIMIT 5`` may answer: PostgreSQL breaks ties as it likes,
    so ``tie_last`` takes the last of equals instead of the first."""
    def distance(i):
        h_lat, h_lon = data.hotel_location(i)
        return round((h_lat - lat) ** 2 + (h_lon - lon) ** 2, 12)
    ids = sorted(range(1, data.HOTELS + 1), key=lambda i: (distance(i), -i if tie_last else i))
    return ids[:5]


def random_point(rng):  # as hotel.loadgen draws them
    return (float(f"{37.7835 + rng.uniform(-0.01, 0.01):.4f}"), float(f"{-122.41 + rng.uniform(-0.012, 0.012):.4f}"))


def test_the_hotel_sites_own_search_answers_pass_wherever_the_point_and_however_ties_break():
    points = [(37.7735 + a * 0.0005, -122.422 + b * 0.0005) for a in range(41) for b in range(49)]
    for lat, lon in points:  # every tie between two hotels falls on this grid
        for tie_last in (False, True):
            assert wrong_answer(hotel.hotels_listed((lat, lon)), 200, profiles(geo_nearest(lat, lon, tie_last))) is None


@pytest.mark.parametrize("stand_in", [b"{}", b"", b"ok", body({"hotels": []}), body([]), body({"hotels": [{}]}),
                                      body({"hotels": [{"id": 999, "name": "x"}]})],
                         ids=["empty object", "no body", "text", "no hotels", "a list", "hotel without id",
                              "unknown hotel"])
def test_a_stand_ins_search_answer_is_wrong(stand_in):
    assert wrong_answer(hotel.hotels_listed((37.78, -122.41)), 200, stand_in)


def test_a_fixed_list_copied_from_one_real_answer_is_wrong_for_most_searches():
    rng = random.Random(0)
    copied = profiles(geo_nearest(37.7835, -122.41))  # the center's answer, replayed for every search
    points = [random_point(rng) for _ in range(500)]
    wrong = sum(bool(wrong_answer(hotel.hotels_listed(p), 200, copied)) for p in points)
    assert wrong / len(points) > 0.8, wrong


def test_login_and_reservation_answers_say_they_worked():
    login = hotel.says("login successful")
    assert wrong_answer(login, 200, body({"message": "login successful"})) is None
    assert wrong_answer(login, 200, b"{}")
    reserve = hotel.says("reservation successful", "no rooms left for these dates")
    assert wrong_answer(reserve, 409, body({"message": "no rooms left for these dates"})) is None
    assert wrong_answer(reserve, 200, body({"message": "ok"}))


def test_the_shops_own_answers_pass_and_stand_ins_do_not():
    pid, name, _ = PRODUCTS[3]
    other = PRODUCTS[4][0]
    catalog = [{"id": p, "name": n, "priceCents": c} for p, n, c in PRODUCTS]
    assert wrong_answer(shop.home_page, 200, body({"products": catalog, "cartItems": 2})) is None
    assert wrong_answer(shop.product_page(pid), 200, body({**catalog[3], "image": None})) is None
    assert wrong_answer(shop.cart_answer, 200, body({"items": [{"productId": pid, "quantity": 1, "priceCents": 5}],
                                                     "totalCents": 5})) is None
    assert wrong_answer(shop.checkout_answer, 201, body({"orderId": 7, "totalCents": 5})) is None
    assert wrong_answer(shop.checkout_answer, 400, body({"message": "cart is empty"})) is None
    assert wrong_answer(shop.order_history, 200, body({"orders": [], "count": 0, "totalCents": 0})) is None
    assert wrong_answer(shop.added, 201, body({"ok": True})) is None
    for check, status, stand_in in [
            (shop.home_page, 200, b"{}"), (shop.home_page, 200, body({"products": [], "cartItems": 0})),
            (shop.product_page(pid), 200, body({"id": other, "name": name})),
            (shop.product_page(pid), 200, b"{}"), (shop.cart_answer, 200, b"{}"),
            (shop.checkout_answer, 201, b"{}"), (shop.checkout_answer, 400, b"{}"),
            (shop.order_history, 200, b"{}"), (shop.added, 201, b"{}")]:
        assert wrong_answer(check, status, stand_in), (check, stand_in)


def test_the_pipelines_own_answers_pass_and_stand_ins_do_not():
    assert wrong_answer(pipeline.accepted, 202, body({"id": "e1", "stream": "EVENTS", "seq": 4})) is None
    assert wrong_answer(pipeline.accepted, 202, b"{}")
    summary = {"user": "user-3", "events": 2, "purchases": 0, "totalValue": 1.5, "lastEventAt": None}
    assert wrong_answer(pipeline.summary_of("user-3"), 200, body(summary)) is None
    assert wrong_answer(pipeline.summary_of("user-4"), 200, body(summary))  # replayed for another user
    assert wrong_answer(pipeline.summary_of("user-3"), 200, b"{}")
