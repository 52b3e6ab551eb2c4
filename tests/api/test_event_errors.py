"""Every refusal of the events endpoint: its status, its error code, the contract's error shape,
and nothing written (last_seq, row count, chain head and every hash unchanged)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import RequestDataTooBig

from tests import factories
from tests.api.conftest import log_state
from threads.api.errors import exception_handler

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(thread: Any) -> Any:
    factories.append(thread, factories.user("hello"), factories.call("c1", "search"))
    return thread


def _msg(content: Any = "x", **extra: Any) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "content": content, **extra}


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _raw(body: Any) -> str | bytes:
    return body if isinstance(body, str | bytes) else json.dumps(body)


REFUSALS: list[tuple[str, Any, int, str]] = [
    ("malformed json", '{"kind": "message", ', 400, "invalid_json"),
    ("not utf-8", b'{"kind": "\xff"}', 400, "invalid_json"),
    ("trailing garbage", '{"kind": "message"} x', 400, "invalid_json"),
    ("NaN literal", '{"kind": "message", "role": "user", "content": NaN}', 400, "invalid_json"),
    (
        "overflowing number",
        '{"kind": "message", "role": "user", "content": "x", "metadata": {"n": 1e400}}',
        400,
        "invalid_json",
    ),
    ("NUL in a string", _msg("a\u0000b"), 400, "invalid_json"),
    ("NUL in a key", _msg("x", metadata={"a\u0000": 1}), 400, "invalid_json"),
    (
        "lone surrogate",
        '{"kind": "message", "role": "user", "content": "\\ud800"}',
        400,
        "invalid_json",
    ),
    ("over-deep nesting", _msg("x", metadata={"deep": _nested(80)}), 400, "invalid_json"),
    ("very deep nesting", "[" * 100000 + "]" * 100000, 400, "invalid_json"),
    ("top-level list", [_msg()], 400, "validation_error"),
    ("top-level string", '"message"', 400, "validation_error"),
    ("no kind", {"role": "user", "content": "x"}, 400, "validation_error"),
    ("unknown kind", {"kind": "shout", "content": "x"}, 400, "validation_error"),
    (
        "kind is a list",
        {"kind": ["message"], "role": "user", "content": "x"},
        400,
        "validation_error",
    ),
    ("server kind", {"kind": "approval_decision", "decision": "approve"}, 400, "validation_error"),
    ("bad role enum", _msg(role="robot"), 400, "validation_error"),
    ("bad status enum", factories.result("c1", "exploded"), 400, "validation_error"),
    (
        "bad authority",
        factories.annotation("fact", "oracle", {"key": "k", "value": 1}),
        400,
        "validation_error",
    ),
    ("content wrong type", _msg(5), 400, "validation_error"),
    (
        "arguments wrong type",
        {"kind": "tool_call", "tool_call_id": "c", "tool_name": "t", "arguments": [1]},
        400,
        "validation_error",
    ),
    ("metadata wrong type", _msg(metadata=[1]), 400, "validation_error"),
    ("client_event_id wrong type", _msg(client_event_id=7), 400, "validation_error"),
    ("unknown field", _msg(colour="red"), 400, "validation_error"),
    ("bad created_at", _msg(created_at="yesterday"), 400, "validation_error"),
    ("naive created_at", _msg(created_at="2026-01-01T00:00:00"), 400, "validation_error"),
    (
        "created_at before year 1 in UTC",
        _msg(created_at="0001-01-01T00:00:00+01:00"),
        400,
        "validation_error",
    ),
    (
        "refers_to the future",
        factories.annotation("goal", "user", {"text": "t"}) | {"refers_to": [99]},
        400,
        "validation_error",
    ),
    (
        "side effect without idempotency_key",
        {
            "kind": "tool_call",
            "tool_call_id": "c9",
            "tool_name": "pay",
            "arguments": {},
            "side_effect": True,
        },
        400,
        "validation_error",
    ),
    ("result with no open call", factories.result("nobody-called"), 422, "no_open_tool_call"),
    ("events not a list", {"events": {"kind": "message"}}, 400, "validation_error"),
    ("empty batch", {"events": []}, 400, "validation_error"),
    ("batch over 1000", {"events": [_msg(str(i)) for i in range(1001)]}, 400, "validation_error"),
    ("batch with extra keys", {"events": [_msg()], "kind": "message"}, 400, "validation_error"),
    ("batch item not an object", {"events": [_msg(), "x"]}, 400, "validation_error"),
]


@pytest.mark.parametrize("name, body, status, code", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_write_nothing(agent, seeded, name, body, status, code):
    before = log_state(seeded)
    response = agent.post(
        f"/api/v1/threads/{seeded.id}/events/", data=_raw(body), content_type="application/json"
    )
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert isinstance(error["fields"], dict)
    assert log_state(seeded) == before


def test_an_event_over_the_byte_limit_is_413(agent, seeded, settings):
    settings.CTXADMIN_MAX_EVENT_BYTES = 2000
    before = log_state(seeded)
    url = f"/api/v1/threads/{seeded.id}/events/"
    response = agent.post(url, data=json.dumps(_msg("x" * 3000)), content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    batch = {"events": [_msg("small"), _msg("x" * 3000)]}
    response = agent.post(url, data=json.dumps(batch), content_type="application/json")
    assert response.status_code == 413
    assert "events[1]" in response.json()["error"]["fields"]
    assert log_state(seeded) == before
    fits = agent.post(url, data=json.dumps(_msg("x" * 1000)), content_type="application/json")
    assert fits.status_code == 201


def test_a_request_over_the_upload_limit_is_413(agent, seeded, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    before = log_state(seeded)
    body = {"events": [_msg("y" * 500) for _ in range(40)]}
    response = agent.post(
        f"/api/v1/threads/{seeded.id}/events/",
        data=json.dumps(body),
        content_type="application/json",
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert log_state(seeded) == before


def test_request_data_too_big_maps_to_the_contract_shape():
    response = exception_handler(RequestDataTooBig("too big"), {})
    assert response is not None
    assert response.status_code == 413
    assert response.data["error"]["code"] == "payload_too_large"


@pytest.mark.parametrize(
    "content_type, data",
    [
        ("text/plain", '{"kind": "message", "role": "user", "content": "x"}'),
        ("application/x-www-form-urlencoded", "kind=message&role=user&content=x"),
        ("application/xml", "<event/>"),
        ("", '{"kind": "message", "role": "user", "content": "x"}'),
    ],
)
def test_non_json_content_types_are_415(agent, seeded, content_type, data):
    before = log_state(seeded)
    response = agent.generic(
        "POST", f"/api/v1/threads/{seeded.id}/events/", data, content_type=content_type
    )
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    assert log_state(seeded) == before


def test_multipart_is_415(agent, seeded):
    response = agent.post(f"/api/v1/threads/{seeded.id}/events/", {"kind": "message"})
    assert response.status_code == 415


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nothing-here/",
        "/api/v1/threads/x/events/y/",
        "/api/v2/threads/",
        "/api/v1/threads",
    ],
)
def test_unknown_api_routes_are_json_404(agent, path):
    response = agent.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == "not_found"


def test_wrong_method_is_405_json(agent, seeded):
    response = agent.delete(f"/api/v1/threads/{seeded.id}/events/")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_error_handlers_answer_json_under_api_and_html_elsewhere(rf):
    from threads.api.errors import handler404, handler500

    api = handler404(rf.get("/api/v1/whatever/"), Exception("x"))
    assert api.status_code == 404 and json.loads(api.content)["error"]["code"] == "not_found"
    crash = handler500(rf.get("/api/v1/threads/"))
    assert crash.status_code == 500
    assert json.loads(crash.content)["error"]["code"] == "server_error"
    page = handler404(rf.get("/threads/nope/"), Exception("x"))
    assert page.status_code == 404 and not page["Content-Type"].startswith("application/json")


def test_a_failing_after_append_hook_does_not_fail_the_append(
    agent, seeded, monkeypatch, django_capture_on_commit_callbacks
):
    from threads.services import events as events_service

    ran = []

    def broken(thread: Any, events: Any) -> None:
        ran.append(thread.pk)
        raise RuntimeError("fold trigger exploded")

    monkeypatch.setattr(events_service, "after_append_hooks", [broken])
    with django_capture_on_commit_callbacks(execute=True):
        response = agent.post(
            f"/api/v1/threads/{seeded.id}/events/",
            data=json.dumps(_msg("still stored")),
            content_type="application/json",
        )
    assert response.status_code == 201
    assert ran == [seeded.pk]
    seeded.refresh_from_db()
    assert seeded.last_seq == 3
