"""What the shop answers (:mod:`svckit.answers`): the catalog's products on the home page, the
product asked for on its page, a cart of the catalog's products, an order id, an order history."""

from __future__ import annotations

from svckit.answers import json_object
from shop.catalog import PRODUCTS

NAMES = {pid: name for pid, name, _ in PRODUCTS}


def home_page(_status: int, body: bytes) -> str | None:
    page = json_object(body)
    ids = [p["id"] for p in page["products"]]
    if not ids or not set(ids) <= set(NAMES):
        return f"not the catalog's products: {ids[:5]}"
    return None if isinstance(page["cartItems"], int) else "no cart count"


def product_page(pid: str):
    def check(_status: int, body: bytes) -> str | None:
        page = json_object(body)
        return None if (page["id"], page["name"]) == (pid, NAMES[pid]) else f"product {page['id']!r}, not {pid}"
    return check


def cart_answer(_status: int, body: bytes) -> str | None:
    cart = json_object(body)
    items = cart["items"]
    if not isinstance(items, list) or any(i["productId"] not in NAMES for i in items):
        return "not a cart of the catalog's products"
    return None if isinstance(cart["totalCents"], int) else "no cart total"


def checkout_answer(status: int, body: bytes) -> str | None:
    answer = json_object(body)
    if status == 400:
        return None if answer.get("message") == "cart is empty" else f"400 saying {answer.get('message')!r}"
    return None if isinstance(answer["orderId"], int) else "no order id"


def order_history(_status: int, body: bytes) -> str | None:
    history = json_object(body)
    if not isinstance(history["orders"], list) or not isinstance(history["count"], int):
        return "not an order history"
    return None if history["count"] >= len(history["orders"]) else "more orders listed than counted"


def added(_status: int, body: bytes) -> str | None:
    return None if json_object(body).get("ok") is True else "not added to the cart"
