"""A pod admission webhook server: admission.k8s.io/v1 AdmissionReview over HTTPS, standard library only.

It admits every request (a policy whose rules all pass). Run as ``python3 server.py``; the port
comes from PORT, the key pair from TLS_DIR (tls.crt, tls.key, as a kubernetes.io/tls Secret mounts it).
"""

import json
import os
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def review_response(review):
    """The AdmissionReview answering ``review`` (a decoded request); raises ValueError if it is not one."""
    if not isinstance(review, dict) or not isinstance(review.get("request"), dict) or "uid" not in review["request"]:
        raise ValueError("not an AdmissionReview request")
    return {"apiVersion": review.get("apiVersion") or "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True}}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/healthz":
            self._send(200, b"ok\n", "text/plain")
        else:
            self._send(404, b"not found\n", "text/plain")

    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
            answer = review_response(json.loads(self.rfile.read(length) or b"null"))
        except ValueError as e:
            self._send(400, f"{e}\n".encode(), "text/plain")
            return
        self._send(200, json.dumps(answer).encode(), "application/json")

    def _send(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - quiet: one line per request would drown the log
        pass


def main():
    port = int(os.environ.get("PORT", "8443"))
    tls_dir = os.environ.get("TLS_DIR", "/tls")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(tls_dir, "tls.crt"), os.path.join(tls_dir, "tls.key"))
    server = ThreadingHTTPServer(("", port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"pod admission policy: serving on :{port}", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
