"""A LangGraph checkpoint_id is one segment of `.../langgraph/checkpoints/{checkpoint_id}/`, held
to the rule external ids follow (threads/domain/external_ids.py, docs/api.md,
"Put a checkpoint — `POST /api/v1/threads/{id}/langgraph/checkpoints/`"): `a/b`, `.` and `..` would
be stored and then unreachable by their URL, and a checkpoint named `latest` would shadow
`.../latest/`. Refused with 400 `validation_error` naming the field, wherever an id is taken, with
nothing stored; on the production settings (DEBUG off)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from integrations.langgraph_checkpointer.models import LanggraphCheckpoint, LanggraphWrite

pytestmark = pytest.mark.django_db

BAD_IDS = ["a/b", "..", ".", "latest", "/", "x/../y"]
GOOD_ID = "1f0c4a2e-6a1b-6d2c-8000-4f1a2b3c4d5e"  # as LangGraph makes them (uuid6)


@pytest.fixture(autouse=True)
def production(settings: Any) -> None:
    settings.DEBUG = False


def _put(agent: APIClient, external_id: str, **fields: Any) -> Any:
    checkpoint_id = fields.get("checkpoint_id", GOOD_ID)
    body = {
        "checkpoint_id": checkpoint_id,
        "checkpoint": {"v": 4, "id": checkpoint_id, "channel_versions": {}},
        **fields,
    }
    return agent.post(f"/api/v1/threads/{external_id}/langgraph/checkpoints/", body, format="json")


def _refused_naming(answer: Any, field: str) -> None:
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert field in error["fields"], error


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_put_with_a_checkpoint_id_its_url_cannot_reach_is_refused(
    agent: APIClient, bad: str
) -> None:
    _refused_naming(_put(agent, "lg-ids", checkpoint_id=bad), "checkpoint_id")
    assert not LanggraphCheckpoint.objects.exists()


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_put_naming_such_a_parent_is_refused(agent: APIClient, bad: str) -> None:
    _refused_naming(_put(agent, "lg-ids", parent_checkpoint_id=bad), "parent_checkpoint_id")
    assert not LanggraphCheckpoint.objects.exists()


def test_latest_still_names_the_newest_and_a_good_id_reads_back(agent: APIClient) -> None:
    """The refused `latest` put cannot shadow `.../latest/`, which keeps naming the newest."""
    _refused_naming(_put(agent, "lg-ids", checkpoint_id="latest"), "checkpoint_id")
    assert _put(agent, "lg-ids").status_code == 201
    base = "/api/v1/threads/lg-ids/langgraph/checkpoints/"
    latest = agent.get(base + "latest/")
    assert latest.status_code == 200, latest.content
    assert latest.json()["checkpoint_id"] == GOOD_ID
    assert agent.get(base + GOOD_ID + "/").json()["checkpoint_id"] == GOOD_ID


@pytest.mark.parametrize("bad", BAD_IDS)
def test_writes_to_such_a_checkpoint_id_are_refused(agent: APIClient, bad: str) -> None:
    assert _put(agent, "lg-ids").status_code == 201
    body = {
        "checkpoint_id": bad,
        "task_id": "t1",
        "writes": [{"idx": 0, "channel": "x", "type": "json", "data": "e30="}],
    }
    answer = agent.post("/api/v1/threads/lg-ids/langgraph/writes/", body, format="json")
    _refused_naming(answer, "checkpoint_id")
    assert not LanggraphWrite.objects.exists()


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_list_filtered_by_such_a_checkpoint_id_is_refused(agent: APIClient, bad: str) -> None:
    for path in ("/api/v1/threads/lg-ids/langgraph/checkpoints/", "/api/v1/langgraph/checkpoints/"):
        _refused_naming(agent.get(path, {"checkpoint_id": bad}), "checkpoint_id")
