"""The pipeline workload: forty users' events in, their summaries read back.

Each answer is checked for what the pipeline answers to that request (:mod:`pipeline.answers`)."""

import random

from svckit import loadgen
from svckit.loadgen import Call
from pipeline.answers import accepted, summary_of

KINDS = ("view", "view", "view", "click", "purchase")


def _user(rng: random.Random) -> str:
    return f"user-{rng.randint(0, 39)}"


def summary(rng: random.Random) -> Call:
    user = _user(rng)
    return Call("GET", f"/users/{user}/summary", check=summary_of(user))


ENDPOINTS = {
    "ingest": lambda rng: Call("POST", "/events", {"json": {"user": _user(rng), "kind": rng.choice(KINDS),
                                                            "value": round(rng.uniform(1, 100), 2)}},
                               ok_statuses=(202,), check=accepted),
    "summary": summary,
}
DEFAULT_MIX = {"ingest": 0.6, "summary": 0.4}


def main() -> None:
    loadgen.main("event-pipeline", ENDPOINTS, DEFAULT_MIX)
