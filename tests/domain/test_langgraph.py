"""LangChain messages as events and back: each JSON form is rebuilt exactly from its events."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)

from integrations.langgraph_checkpointer.domain.messages import (
    METADATA_KEY,
    message_digest,
    message_event_bodies,
    message_from_event,
)
from threads.domain.errors import InvalidEvent
from threads.domain.events import normalize_event

AI = AIMessage(
    "Let me check.",
    id="a1",
    tool_calls=[
        {"name": "lookup", "args": {"order": 7}, "id": "c1", "type": "tool_call"},
        {"name": "lookup", "args": {"order": 8}, "id": "c2", "type": "tool_call"},
    ],
)


def _roundtrip(form: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    bodies = message_event_bodies(form, "key-1")
    # Every body is an event the log accepts from an agent.
    events = [normalize_event(body, max_bytes=1 << 20) for body in bodies]
    carrier = events[0]
    return bodies, message_from_event(carrier.kind, carrier.data, carrier.metadata)


@pytest.mark.parametrize(
    "message, kind, role",
    [
        (HumanMessage("refund order 7", id="h1"), "message", "user"),
        (SystemMessage("be brief", id="s1"), "message", "system"),
        (AIMessage("done", id="a2"), "message", "assistant"),
        (ChatMessage(content="hi", role="developer", id="d1"), "message", "developer"),
        (ToolMessage("refunded", tool_call_id="c1", id="t1"), "tool_result", None),
    ],
)
def test_a_message_is_one_event_and_comes_back_exactly(
    message: Any, kind: str, role: str | None
) -> None:
    form = message_to_dict(message)
    bodies, back = _roundtrip(form)
    assert back == form
    assert [b["kind"] for b in bodies] == [kind]
    assert bodies[0].get("role") == role
    # The event holds the content once: the metadata keeps everything else.
    assert "content" not in bodies[0]["metadata"][METADATA_KEY]["data"]


def test_an_assistant_message_has_one_tool_call_event_per_call() -> None:
    bodies, back = _roundtrip(message_to_dict(AI))
    assert back == message_to_dict(AI)
    assert [(b["kind"], b.get("tool_call_id"), b["client_event_id"]) for b in bodies] == [
        ("message", None, "key-1"),
        ("tool_call", "c1", "key-1/call/c1"),
        ("tool_call", "c2", "key-1/call/c2"),
    ]
    assert bodies[1]["arguments"] == {"order": 7} and bodies[1]["tool_name"] == "lookup"


def test_an_error_tool_message_is_a_failed_result() -> None:
    form = message_to_dict(ToolMessage("boom", tool_call_id="c1", id="t2", status="error"))
    bodies, back = _roundtrip(form)
    assert bodies[0]["status"] == "failed" and back == form


def test_a_message_with_no_event_form_is_refused() -> None:
    with pytest.raises(InvalidEvent):
        message_event_bodies(message_to_dict(FunctionMessage(content="x", name="f", id="f1")), "k")
    with pytest.raises(InvalidEvent):
        message_event_bodies({"type": "human"}, "k")


def test_the_digest_ignores_key_order_and_sees_every_change() -> None:
    form = message_to_dict(AI)
    reordered = {"data": dict(reversed(list(form["data"].items()))), "type": form["type"]}
    assert message_digest(form) == message_digest(reordered)
    edited = message_to_dict(AIMessage("Edited.", id="a1"))
    assert message_digest(edited) != message_digest(form)


def _error(exc: BaseException, name: str = "refund") -> ToolMessage:
    """The message ToolNode(handle_tool_errors=True) makes of a tool's exception."""
    return ToolMessage(
        f"Error: {exc!r}\n Please fix your mistakes.",
        tool_call_id="c1",
        name=name,
        status="error",
        id="t-err",
    )


class OutcomeUnknown(Exception):  # noqa: N818 (the client's name, matched by name)
    pass


class ReadTimeout(Exception):  # noqa: N818 (httpx's and requests' name)
    pass


@pytest.mark.parametrize(
    ("message", "status"),
    [
        (_error(TimeoutError("read timed out")), "timeout"),
        (_error(ReadTimeout("read timed out")), "timeout"),
        (_error(ConnectionResetError(104, "reset")), "timeout"),
        (_error(BrokenPipeError()), "timeout"),
        (_error(OutcomeUnknown("no answer")), "timeout"),
        # failed only when the tool knows nothing happened
        (_error(ValueError("order 7 is not refundable")), "failed"),
        # a read-only tool's timeout changed nothing in the world
        (_error(TimeoutError("read timed out"), name="lookup"), "failed"),
        # the tool states the outcome itself
        (
            ToolMessage(
                "no answer",
                tool_call_id="c1",
                name="lookup",
                id="t-m",
                additional_kwargs={"ctxadmin_outcome": "unknown"},
            ),
            "timeout",
        ),
        (ToolMessage("refunded", tool_call_id="c1", name="refund", id="t-ok"), "succeeded"),
    ],
)
def test_a_side_effecting_tools_timeout_is_unknown_never_failed(
    message: ToolMessage, status: str
) -> None:
    [body] = message_event_bodies(message_to_dict(message), "k", side_effect_tools={"refund"})
    assert body["status"] == status
    # and the message still comes back exactly from its event
    event = normalize_event(body, max_bytes=1 << 20)
    assert message_from_event(event.kind, event.data, event.metadata) == message_to_dict(message)
