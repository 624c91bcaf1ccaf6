"""The shop workload: browsing, product pages, carts, checkouts and order histories by fifty shoppers."""

import random

from svckit import loadgen
from svckit.loadgen import Call
from shop.catalog import PRODUCTS


def _user(rng: random.Random) -> str:
    return f"shopper-{rng.randint(0, 49)}"


ENDPOINTS = {
    "home": lambda rng: Call("GET", "/", {"params": {"user": _user(rng)}}),
    "product": lambda rng: Call("GET", f"/product/{rng.choice(PRODUCTS)[0]}"),
    "add_to_cart": lambda rng: Call("POST", f"/cart/{_user(rng)}", {
        "json": {"productId": rng.choice(PRODUCTS)[0], "quantity": rng.randint(1, 3)}}),
    "view_cart": lambda rng: Call("GET", f"/cart/{_user(rng)}"),
    # an empty cart answers 400: a shopper's mistake, not a failure of the shop
    "checkout": lambda rng: Call("POST", f"/cart/{_user(rng)}/checkout", ok_statuses=(201, 400)),
    "order_history": lambda rng: Call("GET", f"/account/{_user(rng)}/orders"),
}
DEFAULT_MIX = {"home": 0.35, "product": 0.2, "add_to_cart": 0.15, "view_cart": 0.1, "checkout": 0.1,
               "order_history": 0.1}


def main() -> None:
    loadgen.main("online-shop", ENDPOINTS, DEFAULT_MIX)
