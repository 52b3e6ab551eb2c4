"""Hostile bodies on every write endpoint, and every method on a few paths: a 4xx in the
contract's error shape (docs/api.md, "Error shape"), never a 5xx, and nothing stored.
(Random bodies against the events endpoint live in test_fuzz.py.)"""

from __future__ import annotations

import io
from typing import Any

import pytest

from tests import factories
from threads.models import Event, Thread

pytestmark = pytest.mark.django_db

LIMIT = 20_000  # CTXADMIN_MAX_REQUEST_BYTES, lowered for the test

BODIES: dict[str, bytes] = {
    "oversize": b'{"kind": "message", "role": "user", "content": "' + b"x" * (2 * LIMIT) + b'"}',
    "deep_nesting": b"[" * 10_000 + b"]" * 10_000,
    "deep_object": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    "number_5000_digits": b'{"kind": "message", "role": "user", "content": "x", "metadata": '
    b'{"n": 2.' + b"0" * 4_998 + b"1}}",
    "invalid_utf8": b'{"kind": "message", "role": "user", "content": "\xff\xfe\xc3("}',
    "nul_escaped": b'{"kind": "message", "role": "user", "content": "a\\u0000b"}',
    "nul_raw": b'{"kind": "message", "role": "user", "content": "a\x00b"}',
    "lone_surrogate": b'{"kind": "message", "role": "user", "content": "\\ud800"}',
    "lone_low_surrogate_in_key": b'{"kind": "message", "role": "user", "content": "x", '
    b'"metadata": {"\\udfff": 1}}',
    "nan": b'{"kind": "message", "role": "user", "content": "x", "metadata": {"n": NaN}}',
    "truncated": b'{"kind": "message", "role": ',
}

# (method, path template) of every write; {thread} is a real thread of the agent's workspace.
WRITES = [
    ("post", "/api/v1/threads/"),
    ("post", "/api/v1/threads/{thread}/events/"),
    ("put", "/api/v1/threads/{thread}/tools/"),
    ("post", "/api/v1/threads/{thread}/fold/"),
    ("post", "/api/v1/threads/{thread}/verify/"),
    ("post", "/api/v1/threads/{thread}/checkpoints/"),
    ("post", "/api/v1/threads/{thread}/rollback/"),
    ("post", "/api/v1/threads/{thread}/fork/"),
    ("post", "/api/v1/side-effects/1/resolve/"),
    ("post", "/api/v1/approvals/1/decide/"),
    ("post", "/api/v1/threads/{thread}/langgraph/checkpoints/"),
    ("post", "/api/v1/threads/{thread}/langgraph/writes/"),
    ("post", "/api/v1/threads/{thread}/langgraph/copy/"),
    ("post", "/api/v1/langgraph/prune/"),
    ("post", "/api/v1/langgraph/delete-for-runs/"),
]


def _counts() -> tuple[int, int]:
    return Event.objects.count(), Thread.objects.count()


def _assert_error_shape(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str)
    assert isinstance(error["fields"], dict)


@pytest.fixture
def seeded(thread: Any, settings: Any) -> Any:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT
    settings.CTXADMIN_MAX_IMPORT_BYTES = LIMIT
    factories.append(thread, factories.user("hello"), factories.call("c1", "search"))
    return thread


@pytest.mark.parametrize("kind", sorted(BODIES))
@pytest.mark.parametrize(("method", "path"), WRITES)
def test_hostile_body_is_a_4xx_in_the_error_shape_and_stores_nothing(
    agent: Any, seeded: Any, method: str, path: str, kind: str
) -> None:
    before = _counts()
    response = getattr(agent, method)(
        path.format(thread=seeded.id), data=BODIES[kind], content_type="application/json"
    )
    _assert_error_shape(response)
    assert _counts() == before


@pytest.mark.parametrize(
    "field",
    [
        {"format": "auto", "file": b"x" * (2 * LIMIT)},  # oversize
        {"format": "nul\x00", "file": b"[]"},
        {"format": "\ud800", "file": b"[]"},
        {"format": "auto"},  # no file
    ],
    ids=["oversize", "nul", "lone_surrogate", "no_file"],
)
def test_hostile_import_upload_is_a_4xx_and_stores_nothing(
    agent: Any, seeded: Any, field: dict[str, Any]
) -> None:
    before = _counts()
    data = {
        k: io.BytesIO(v) if isinstance(v, bytes) else v.encode("utf-8", "surrogatepass")
        for k, v in field.items()
    }
    if "file" in data:
        data["file"].name = "trace.json"
    response = agent.post("/api/v1/imports/", data=data, format="multipart")
    _assert_error_shape(response)
    assert _counts() == before


def test_invalid_utf8_in_a_multipart_field_is_a_4xx(agent: Any, seeded: Any) -> None:
    boundary = "b0undary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\n'.encode()
        + b"\xff\xfe"
        + f"\r\n--{boundary}--\r\n".encode()
    )
    response = agent.post(
        "/api/v1/imports/", data=body, content_type=f"multipart/form-data; boundary={boundary}"
    )
    _assert_error_shape(response)


PATHS = [
    "/api/v1/threads/",
    "/api/v1/threads/{thread}/",
    "/api/v1/threads/{thread}/events/",
    "/api/v1/threads/{thread}/summaries/",
    "/api/v1/imports/",
    "/api/v1/side-effects/",
    "/api/v1/nowhere/",
    "/api/v1/threads/{thread}/nowhere",
]
METHODS = ["get", "post", "put", "patch", "delete", "head", "options", "trace"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("who", ["agent", "anonymous"])
def test_every_method_on_every_path_answers_json(
    agent: Any, client: Any, seeded: Any, who: str, method: str, path: str
) -> None:
    caller = agent if who == "agent" else client
    before = _counts()
    response = caller.generic(
        method.upper(),
        path.format(thread=seeded.id),
        data=b'{"x": "\\ud800"}',
        content_type="application/json",
    )
    assert response.status_code < 500, response.content[:300]
    if method == "head":
        assert not response.content
    elif response.status_code >= 400:
        _assert_error_shape(response)
    assert _counts() == before


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
@pytest.mark.parametrize(
    "path", ["/api/v1/threads/", "/api/v1/threads/{thread}/fold/", "/api/v1/nowhere/"]
)
def test_a_session_write_without_csrf_token_is_a_json_403_or_404(
    operator_client: Any, seeded: Any, method: str, path: str
) -> None:
    before = _counts()
    response = getattr(operator_client, method)(
        path.format(thread=seeded.id), data=b"{}", content_type="application/json"
    )
    assert response.status_code in (403, 404, 405), response.content[:300]
    _assert_error_shape(response)
    assert _counts() == before
