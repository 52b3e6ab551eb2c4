"""The blocking client against a live server: threads, appends, paging, the working context,
and the server's own error answers as typed errors (each sent once: no retry on a 4xx)."""

from __future__ import annotations

from typing import Any

import pytest
from ctxadmin_client import (
    AuthError,
    Client,
    ConflictError,
    CtxadminError,
    NotFoundError,
    Thread,
    UnprocessableError,
    ValidationError,
)

from tests import factories
from tests.client.conftest import CountingTransport, Server
from threads.models import Event
from threads.models import Thread as ThreadRow


def user(text: str) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "content": text}


@pytest.fixture
def client(server: Server, counting: CountingTransport) -> Any:
    with Client(server.url, server.api_key, transport=counting) as client:
        yield client


def test_thread_is_created_once_and_then_returned(server: Server, client: Client) -> None:
    thread = client.thread("order-1", title="First", context_window=9000, reserved_output=500)
    assert isinstance(thread, Thread)
    again = client.thread("order-1", title="ignored")
    assert again.id == thread.id and again.external_id == "order-1"
    assert again.data["title"] == "First"
    row = ThreadRow.objects.get(pk=thread.id)
    assert (row.context_window, row.reserved_output) == (9000, 500)
    assert client.get_thread("order-1").id == thread.id
    assert client.get_thread(thread.id).external_id == "order-1"


def test_append_answers_and_refresh(client: Client) -> None:
    thread = client.thread("order-2")
    answers = thread.append(
        user("refund order 2"),
        {"kind": "tool_call", "tool_call_id": "c1", "tool_name": "refund", "arguments": {"o": 2}},
    )
    assert [a["seq"] for a in answers] == [1, 2]
    assert all(a["hash"] and a["token_count"] > 0 and a["replayed"] is False for a in answers)
    [one] = thread.append({"kind": "tool_result", "tool_call_id": "c1", "status": "succeeded"})
    assert one["seq"] == 3
    assert thread.data["last_seq"] == 0
    assert thread.refresh()["last_seq"] == 3 and thread.data["last_seq"] == 3
    # The same dict again: a replay, answered 200 with the original.
    event = user("once")
    [first] = thread.append(event)
    [replay] = thread.append(event)
    assert replay["seq"] == first["seq"] and replay["replayed"] is True
    assert Event.objects.filter(thread_id=thread.id).count() == 4


def test_events_iterates_every_page(client: Client, counting: CountingTransport) -> None:
    thread = client.thread("long")
    sent = [user(f"m{i}") for i in range(1005)]
    counting.requests.clear()
    answers = thread.append(*sent)
    assert [a["seq"] for a in answers] == list(range(1, 1006))
    assert [m for m, _ in counting.requests] == ["POST", "POST"], "1000 + 5"

    counting.requests.clear()
    events = list(thread.events())
    assert [e["seq"] for e in events] == list(range(1, 1006))
    assert [e["client_event_id"] for e in events] == [e["client_event_id"] for e in sent]
    assert len(counting.requests) == 2, "pages of 1000 (the server's largest)"

    counting.requests.clear()
    after = list(thread.events(after=990, page_size=4))
    assert [e["seq"] for e in after] == list(range(991, 1006))
    assert len(counting.requests) == 4
    assert list(thread.events(after=1005)) == []


def test_context_with_budget_overrides(client: Client) -> None:
    thread = client.thread("ctx", context_window=16000, reserved_output=1000)
    thread.append(user("hello"), {"kind": "message", "role": "assistant", "content": "hi"})
    context = thread.context()
    assert context["read_until"] == 2 and [e["seq"] for e in context["events"]] == [1, 2]
    assert context["budget"]["window"] == 16000 and context["budget"]["reserved_output"] == 1000
    smaller = thread.context(
        window=4000, reserved_output=100, reasoning_reserve=50, safety_margin=10, fixed_tokens=200
    )
    assert {k: smaller["budget"][k] for k in ("window", "fixed", "reserved_output")} == {
        "window": 4000,
        "fixed": 200,
        "reserved_output": 100,
    }
    assert (smaller["budget"]["reasoning_reserve"], smaller["budget"]["safety_margin"]) == (50, 10)


def test_integrity(client: Client) -> None:
    thread = client.thread("chain")
    thread.append(user("a"))
    verdict = thread.integrity()
    assert {"chain_ok", "first_bad_seq", "verified_until", "last_safe_checkpoint"} <= set(verdict)


def once(counting: CountingTransport) -> None:
    assert len(counting.requests) == 1, counting.requests
    counting.requests.clear()


def test_typed_errors_from_the_server(
    server: Server, client: Client, counting: CountingTransport
) -> None:
    thread = client.thread("errors")
    counting.requests.clear()

    with pytest.raises(NotFoundError) as not_found:
        client.get_thread("no-such-thread")
    assert (not_found.value.status, not_found.value.code) == (404, "not_found")
    once(counting)

    with pytest.raises(UnprocessableError) as no_call:
        thread.append({"kind": "tool_result", "tool_call_id": "nope", "status": "succeeded"})
    assert (no_call.value.status, no_call.value.code) == (422, "no_open_tool_call")
    once(counting)

    thread.append({**user("first"), "client_event_id": "e-1"})
    counting.requests.clear()
    with pytest.raises(ConflictError) as reused:
        thread.append({**user("another body"), "client_event_id": "e-1"})
    assert (reused.value.status, reused.value.code) == (409, "idempotency_conflict")
    once(counting)

    with pytest.raises(ValidationError) as invalid:
        thread.append(user("ok"), {"kind": "message", "role": "robot", "content": "x"})
    assert (invalid.value.status, invalid.value.code) == (400, "validation_error")
    assert "events[1]" in invalid.value.fields
    once(counting)

    with pytest.raises(ValidationError) as unknown:
        client.thread("x", colour="blue")
    assert unknown.value.fields == {"colour": "unknown field"}
    once(counting)

    # An open tool call is pinned: it never leaves the context, so 10 tokens cannot hold it.
    thread.append(
        {
            "kind": "tool_call",
            "tool_call_id": "open",
            "tool_name": "t",
            "arguments": {"q": "x" * 99},
        }
    )
    counting.requests.clear()
    with pytest.raises(UnprocessableError) as small:
        thread.context(window=10, reserved_output=0, safety_margin=0)
    assert small.value.code == "budget_too_small"
    assert small.value.fields["available"] < small.value.fields["pinned"]
    once(counting)

    # Another workspace's thread is 404, as if it did not exist.
    other, _ = factories.make_workspace("globex")
    hidden = factories.make_thread(other, external_id="secret")
    with pytest.raises(NotFoundError):
        client.get_thread(str(hidden.pk))

    with Client(server.url, "wrong-key", transport=counting) as stranger:
        counting.requests.clear()
        with pytest.raises(AuthError) as denied:
            stranger.thread("x")
        assert (denied.value.status, denied.value.code) == (401, "authentication_failed")
        once(counting)
    assert isinstance(denied.value, CtxadminError)
    # Nothing the failed requests sent was stored.
    assert Event.objects.filter(thread_id=thread.id).count() == 2
