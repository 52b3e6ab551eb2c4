"""Rules of the LangGraph endpoints' input that the schema cannot state alone (docs/api.md §14):
each answers 400 in the error shape, naming the field, and stores nothing."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from threads.models import LanggraphWrite

pytestmark = pytest.mark.django_db


def _fields(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    return error["fields"]


@pytest.mark.parametrize(
    "page_after", ["12", ":12", "cp-1:", "cp-1:x", "\x0c:25", "cp-1:²", "cp-1:" + "9" * 30]
)
def test_a_page_after_that_no_page_gave_is_refused(
    agent: APIClient, thread: Any, page_after: str
) -> None:
    answer = agent.get(
        f"/api/v1/threads/{thread.id}/langgraph/checkpoints/", {"page_after": page_after}
    )
    assert "page_after" in _fields(answer)


def test_a_page_after_of_the_documented_form_is_read(agent: APIClient, thread: Any) -> None:
    answer = agent.get(
        f"/api/v1/threads/{thread.id}/langgraph/checkpoints/", {"page_after": "cp-1:12"}
    )
    assert answer.status_code == 200, answer.content


WRITE = {"idx": 0, "channel": "messages"}
MESSAGES = [{"id": "m1", "digest": "0" * 64, "message": {"type": "human", "data": {}}}]


@pytest.mark.parametrize(
    "write",
    [
        {**WRITE},  # neither
        {**WRITE, "type": "json", "data": "", "messages": MESSAGES},  # both
        {**WRITE, "type": "json"},  # half of the bytes
    ],
)
def test_a_write_sends_bytes_or_messages_never_both_nor_neither(
    agent: APIClient, thread: Any, write: dict[str, Any]
) -> None:
    body = {"checkpoint_ns": "", "checkpoint_id": "cp-1", "task_id": "t1", "writes": [write]}
    answer = agent.post(f"/api/v1/threads/{thread.id}/langgraph/writes/", body, format="json")
    assert "messages" in _fields(answer)["writes"]["0"]
    assert not LanggraphWrite.objects.exists()
