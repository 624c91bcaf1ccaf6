"""The pipeline workload: forty users' events in, their summaries read back."""

import random

from svckit import loadgen
from svckit.loadgen import Call

KINDS = ("view", "view", "view", "click", "purchase")


def _user(rng: random.Random) -> str:
    return f"user-{rng.randint(0, 39)}"


ENDPOINTS = {
    "ingest": lambda rng: Call("POST", "/events", {"json": {"user": _user(rng), "kind": rng.choice(KINDS),
                                                            "value": round(rng.uniform(1, 100), 2)}},
                               ok_statuses=(202,)),
    "summary": lambda rng: Call("GET", f"/users/{_user(rng)}/summary"),
}
DEFAULT_MIX = {"ingest": 0.6, "summary": 0.4}


def main() -> None:
    loadgen.main("event-pipeline", ENDPOINTS, DEFAULT_MIX)
