"""Rules of the LangGraph endpoints' input that the schema cannot state alone (docs/api.md,
"LangGraph checkpointer"): each answers 400 in the error shape, naming the field, and stores
nothing."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from integrations.langgraph_checkpointer.models import LanggraphWrite

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


@pytest.mark.parametrize(
    "metadata_filter",
    [
        "[" * 1000 + "]" * 1000,  # deeper than Python's recursion limit
        '{"a":' + "[" * 100 + "]" * 100 + "}",  # deeper than CTXADMIN_MAX_JSON_DEPTH
        '{"a": NaN}',
        '{"a": Infinity}',
        '{"a": "\\ud800"}',
        '{"a": "\\u0000"}',
        '{"a": 1e400}',
        '{"a": ' + "7" * 5000 + "}",
        '["a"]',
        "{",
    ],
)
@pytest.mark.parametrize("scope", ["/api/v1/langgraph/checkpoints/", "thread"])
def test_a_filter_is_parsed_as_strictly_as_a_body(
    agent: APIClient, thread: Any, metadata_filter: str, scope: str
) -> None:
    path = f"/api/v1/threads/{thread.id}/langgraph/checkpoints/" if scope == "thread" else scope
    assert "filter" in _fields(agent.get(path, {"filter": metadata_filter}))


def test_a_filter_of_the_documented_form_is_read(agent: APIClient, thread: Any) -> None:
    answer = agent.get(
        f"/api/v1/threads/{thread.id}/langgraph/checkpoints/",
        {"filter": '{"source": "loop", "step": 1}'},
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["checkpoints"] == []


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
