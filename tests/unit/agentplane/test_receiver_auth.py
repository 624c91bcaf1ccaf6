"""The conductor's event receiver accepts a submission only with its plane's callback token.

The attack: anything that reaches the receiver's address (an app pod, another cell's agent) posts
a mitigation "submission" to end the agent phase early or put words in the agent's mouth."""

from __future__ import annotations

import json
import time

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from sregym.agentplane.plane import AgentPlane

SUBMISSION = json.dumps({"type": "submission", "at": time.time(), "kind": "mitigation", "text": "fixed"})


def receiver(tmp_path) -> tuple[AgentPlane, TestClient]:
    plane = AgentPlane(tmp_path / "agent.kubeconfig", "shop")
    return plane, TestClient(Starlette(routes=[Route("/events", plane._receive, methods=["POST"])]))


def test_a_forged_submission_is_refused_and_not_recorded(tmp_path):
    plane, client = receiver(tmp_path)
    for headers in ({}, {"Authorization": "Bearer guess"}, {"Authorization": f"Bearer {plane.mcp_token}"},
                    {"Authorization": f"bearer {plane._token}x"}):
        assert client.post("/events", content=SUBMISSION, headers=headers).status_code == 403, headers
    assert plane.submissions == [] and not plane.mitigation_submitted.is_set()


def test_the_planes_own_server_is_heard(tmp_path):
    plane, client = receiver(tmp_path)
    answer = client.post("/events", content=SUBMISSION, headers={"Authorization": f"Bearer {plane._token}"})
    assert answer.status_code == 200
    assert [s.kind for s in plane.submissions] == ["mitigation"] and plane.mitigation_submitted.is_set()
