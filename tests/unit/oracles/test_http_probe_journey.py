"""``http_probe``'s journey (``before``, ``json``, ``follow``), its probe script run as the probe pod
runs it, against a shop on loopback whose worker fulfils orders or leaves them pending: an order
placed must be fulfilled in time for a sample to pass (the worker's queue address cannot be judged
from any answer of checkout, which succeeds either way)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from oracles.http_probe import PROBE_SCRIPT, HttpProbeParams, judged


def shop(fulfils: bool):
    """A cart, a checkout and an order status; orders are fulfilled on their second read, or never."""
    carts: dict[str, int] = {}
    reads: dict[int, int] = {}

    class Shop(BaseHTTPRequestHandler):
        def answer(self, code: int, doc: dict) -> None:
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):  # noqa: N802 - http.server's name
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size) or b"{}")
            user = self.path.split("/")[2]
            if self.path.endswith("/checkout"):
                if not carts.pop(user, 0):
                    return self.answer(400, {"message": "cart is empty"})
                order = len(reads) + 1
                reads[order] = 0
                return self.answer(201, {"orderId": order, "totalCents": 899})
            carts[user] = carts.get(user, 0) + int(body["quantity"])
            return self.answer(201, {"ok": True})

        def do_GET(self):  # noqa: N802
            order = int(self.path.rsplit("/", 1)[1])
            reads[order] += 1
            done = fulfils and reads[order] > 1
            self.answer(200, {"id": order, "status": "fulfilled" if done else "pending"})

        def log_message(self, *a):
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Shop)


def params(port: int) -> HttpProbeParams:
    base = f"http://127.0.0.1:{port}"
    return HttpProbeParams.model_validate({
        "url": f"{base}/cart/shopper-$sample/checkout", "method": "POST", "expect_status": [201],
        "expect_json": ["orderId"], "requests": 2, "timeout_seconds": 2,
        "before": [{"url": f"{base}/cart/shopper-$sample", "json": {"productId": "6E92ZMYYFZ", "quantity": 1}}],
        "follow": {"url": f"{base}/orders/{{orderId}}", "expect_body": '"status": "(fulfilled|rejected)"',
                   "within_seconds": 1.5, "every_seconds": 0.2}})


def probed(fulfils: bool):
    server = shop(fulfils)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        p = params(server.server_address[1])
        out = subprocess.run([sys.executable, "-c", PROBE_SCRIPT, p.url, str(p.requests), "0.2",
                              str(p.timeout_seconds), p.method, json.dumps(p.journey())],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        return judged(out, p)
    finally:
        server.shutdown()


def test_an_order_fulfilled_in_time_passes_each_sample():
    samples = probed(fulfils=True)
    assert [s.passed for s in samples] == [True, True], [s.detail for s in samples]
    assert samples[0].detail["follow"]["status"] == 200


def test_an_order_left_pending_fails_though_checkout_answered():
    samples = probed(fulfils=False)
    assert [s.passed for s in samples] == [False, False]
    assert samples[0].detail["status"] == 201  # checkout itself worked
    assert "follow-up did not match" in samples[0].detail["reason"] and "pending" in samples[0].detail["reason"]


def test_a_failed_first_step_fails_the_sample_and_asks_nothing_further():
    p = params(9)
    line = {"t": 0, "status": None, "error": "POST http://x/cart/shopper-1: HTTP 503", "body": "",
            "before_failed": "POST ...: HTTP 503"}
    [sample] = judged(json.dumps(line), p)
    assert not sample.passed and "HTTP 503" in sample.detail["reason"]


def test_a_follow_up_must_say_what_it_waits_for():
    with pytest.raises(ValueError, match="expect_body"):
        HttpProbeParams.model_validate({"url": "http://x/", "expect_json": ["a"], "follow": {"url": "http://x/{id}"}})
