"""A number a double cannot hold is refused with 400 `number_not_representable`, never
silently rounded; numbers that round-trip are stored as sent (docs/api.md, "Codes")."""

from __future__ import annotations

import sys

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import log_state
from threads.models import Event, Thread

pytestmark = pytest.mark.django_db

LONG = "2." + "0" * 4997 + "1"  # 5,000 digits: as a double it is 2.0


def _message(metadata: str) -> str:
    return '{"kind": "message", "role": "user", "content": "x", "metadata": ' + metadata + "}"


def _post(agent: APIClient, url: str, text: str):  # type: ignore[no-untyped-def]
    return agent.post(url, data=text, content_type="application/json")


@pytest.mark.parametrize(
    ("metadata", "path"),
    [
        ('{"x": ' + LONG + "}", "metadata.x"),
        ('{"a": [1, {"b": 0.1000000000000000000001}]}', "metadata.a[1].b"),
        ('{"tiny": 1e-400}', "metadata.tiny"),
        ('{"x": 9007199254740993.0}', "metadata.x"),
    ],
)
def test_a_number_a_double_cannot_hold_is_refused(
    agent: APIClient, thread: Thread, events_url: str, metadata: str, path: str
) -> None:
    before = log_state(thread)
    answer = _post(agent, events_url, _message(metadata))
    assert answer.status_code == 400, answer.content[:300]
    error = answer.json()["error"]
    assert error["code"] == "number_not_representable"
    assert path in error["fields"]
    assert log_state(thread) == before


def test_the_path_names_the_event_of_a_batch(
    agent: APIClient, thread: Thread, events_url: str
) -> None:
    body = '{"events": [' + _message("{}") + ", " + _message('{"x": ' + LONG + "}") + "]}"
    answer = _post(agent, events_url, body)
    assert answer.status_code == 400
    assert "events[1].metadata.x" in answer.json()["error"]["fields"]
    assert not Event.objects.filter(thread=thread).exists()


@pytest.mark.parametrize(
    ("literal", "stored"),
    [
        ("0.1", 0.1),
        ("1e10", 1e10),
        ("-2.5E-3", -2.5e-3),
        ("0.30000000000000004", 0.30000000000000004),
        ("0.10000000000000001", 0.1),  # 0.1 printed with 17 digits (C's %.17g)
        ("2.50000000000000000000", 2.5),
        ("1.0", 1.0),
        ("12345678901234567890123", 12345678901234567890123),  # integers stay exact
    ],
)
def test_numbers_that_round_trip_are_stored_as_sent(
    agent: APIClient, thread: Thread, events_url: str, literal: str, stored: float
) -> None:
    answer = _post(agent, events_url, _message('{"x": ' + literal + "}"))
    assert answer.status_code == 201, answer.content[:300]
    event = Event.objects.get(thread=thread)
    assert event.metadata["x"] == stored and type(event.metadata["x"]) is type(stored)


@pytest.mark.parametrize("sign", ["", "-"])
def test_an_integer_python_cannot_convert_is_refused_by_name(
    agent: APIClient, thread: Thread, events_url: str, sign: str
) -> None:
    """Integers stay exact up to the digits Python converts from text (4,300); one longer is
    refused naming its path, without Python's own wording, and nothing is stored."""
    limit = sys.get_int_max_str_digits()
    exact = sign + "7" * limit
    assert _post(agent, events_url, _message('{"x": ' + exact + "}")).status_code == 201
    before = log_state(thread)
    answer = _post(agent, events_url, _message('{"n": [' + sign + "7" * (limit + 1) + "]}"))
    assert answer.status_code == 400, answer.content[:300]
    error = answer.json()["error"]
    assert error["code"] == "number_not_representable"
    assert f"more than {limit} digits" in error["fields"]["metadata.n[0]"]
    assert "set_int_max_str_digits" not in error["message"]
    assert log_state(thread) == before
