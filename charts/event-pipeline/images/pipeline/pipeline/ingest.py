"""ingest: validates an event, gives it an id and publishes it to the EVENTS stream; 202 once
JetStream stored it."""

import json
import logging
import uuid

from aiohttp import web
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind

from svckit import jetstream, telemetry, web as svcweb
from pipeline import schema, stream

SERVICE = "ingest"
KINDS = ("view", "click", "purchase")


async def record(request: web.Request) -> web.Response:
    try:
        body = await request.json()
        event = {"user": str(body["user"]), "kind": str(body["kind"]), "value": float(body.get("value", 0))}
    except (ValueError, KeyError, TypeError):
        raise web.HTTPBadRequest(text="want JSON {user, kind, value}") from None
    if event["kind"] not in KINDS:
        raise web.HTTPBadRequest(text=f"kind must be one of {', '.join(KINDS)}")
    # the id the processor stores the event under, also the message id JetStream deduplicates on
    event["id"] = str(uuid.uuid4())
    headers = {"X-Request-ID": telemetry.request_id.get(), schema.MSG_ID_HEADER: event["id"]}
    with trace.get_tracer(SERVICE).start_as_current_span(f"nats publish {stream.SUBJECT}", kind=SpanKind.PRODUCER):
        propagate.inject(headers)
        try:
            ack = await request.app[jetstream.JETSTREAM].publish(stream.SUBJECT, json.dumps(event).encode(),
                                                            headers=headers)
        except Exception as e:
            telemetry.DEPENDENCY_ERRORS.labels(SERVICE, "nats", "publish").inc()
            telemetry.log(logging.getLogger(SERVICE), logging.ERROR, "cannot publish event",
                          error=f"{type(e).__name__}: {e}")
            return web.json_response({"error": "event stream unavailable"}, status=503)
    return web.json_response({"id": event["id"], "stream": ack.stream, "seq": ack.seq}, status=202)


def main() -> None:
    telemetry.setup(SERVICE)
    app = svcweb.make_app(SERVICE)
    jetstream.attach(app, SERVICE, stream.EVENTS)
    app.router.add_post("/events", record)
    svcweb.run(app)
