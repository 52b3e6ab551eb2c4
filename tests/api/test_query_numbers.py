"""A whole number in a query string is ASCII digits with an optional `-` and nothing else
(docs/api.md, "Codes"): `+5`, ` 5`, `5.0` and other scripts' digits are 400 `validation_error`
naming the parameter, as the schema's `type: integer` says, not read as 5."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from rest_framework.test import APIClient

from threads.models import Thread

pytestmark = pytest.mark.django_db

NOT_WHOLE_NUMBERS = ["+5", " 5", "5 ", "5.0", "\uff15", "\u0665", "1_0", "0x5", ""]


def _routes(thread: Thread) -> list[tuple[str, str]]:
    return [
        ("/api/v1/threads/", "limit"),
        ("/api/v1/threads/", "offset"),
        (f"/api/v1/threads/{thread.pk}/events/", "after"),
        (f"/api/v1/threads/{thread.pk}/events/", "limit"),
        (f"/api/v1/threads/{thread.pk}/context/", "window"),
        ("/api/v1/search/?q=refund", "limit"),
        (f"/api/v1/threads/{thread.pk}/langgraph/checkpoints/", "limit"),
    ]


@pytest.mark.parametrize("value", NOT_WHOLE_NUMBERS)
def test_only_ascii_digits_are_a_whole_number(agent: APIClient, thread: Thread, value: str) -> None:
    for path, name in _routes(thread):
        joiner = "&" if "?" in path else "?"
        answer = agent.get(path + joiner + urlencode({name: value}))
        assert answer.status_code == 400, (path, name, value, answer.content)
        error = answer.json()["error"]
        assert error["code"] == "validation_error" and name in error["fields"], (path, error)


def test_plain_digits_still_read(agent: APIClient, thread: Thread) -> None:
    for path, name in _routes(thread):
        joiner = "&" if "?" in path else "?"
        value = "100000" if name == "window" else "1"
        answer = agent.get(path + joiner + urlencode({name: value}))
        assert answer.status_code == 200, (path, name, answer.content)
