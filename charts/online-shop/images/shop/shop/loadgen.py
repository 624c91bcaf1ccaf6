"""The shop workload: browsing, product pages, carts, checkouts and order histories by fifty shoppers.

Each answer is checked for what the shop answers to that request (:mod:`shop.answers`)."""

import random

from svckit import loadgen
from svckit.loadgen import Call
from shop.answers import added, cart_answer, checkout_answer, home_page, order_history, product_page
from shop.catalog import PRODUCTS


def _user(rng: random.Random) -> str:
    return f"shopper-{rng.randint(0, 49)}"


def product(rng: random.Random) -> Call:
    pid = rng.choice(PRODUCTS)[0]
    return Call("GET", f"/product/{pid}", check=product_page(pid))


ENDPOINTS = {
    "home": lambda rng: Call("GET", "/", {"params": {"user": _user(rng)}}, check=home_page),
    "product": product,
    "add_to_cart": lambda rng: Call("POST", f"/cart/{_user(rng)}", {
        "json": {"productId": rng.choice(PRODUCTS)[0], "quantity": rng.randint(1, 3)}},
        check=added),
    "view_cart": lambda rng: Call("GET", f"/cart/{_user(rng)}", check=cart_answer),
    # an empty cart answers 400: a shopper's mistake, not a failure of the shop
    "checkout": lambda rng: Call("POST", f"/cart/{_user(rng)}/checkout", ok_statuses=(201, 400),
                                 check=checkout_answer),
    "order_history": lambda rng: Call("GET", f"/account/{_user(rng)}/orders", check=order_history),
}
DEFAULT_MIX = {"home": 0.35, "product": 0.2, "add_to_cart": 0.15, "view_cart": 0.1, "checkout": 0.1,
               "order_history": 0.1}


def main() -> None:
    loadgen.main("online-shop", ENDPOINTS, DEFAULT_MIX)
