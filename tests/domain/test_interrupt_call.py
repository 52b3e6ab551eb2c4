"""What an `interrupt()` approval names of the call it asks about (docs/api.md,
"Put writes — `POST /api/v1/threads/{id}/langgraph/writes/`"): the unanswered calls of the last AI
message, and among several the one the interrupt names."""

from __future__ import annotations

from typing import Any

from integrations.langgraph_checkpointer.domain.messages import interrupt_call, pending_tool_calls


def _ai(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    tool_calls = [{"id": i, "name": n, "args": a, "type": "tool_call"} for i, n, a in calls]
    return {"type": "ai", "data": {"content": "", "tool_calls": tool_calls}}


def _tool(call_id: str) -> dict[str, Any]:
    return {"type": "tool", "data": {"content": "ok", "tool_call_id": call_id}}


HUMAN = {"type": "human", "data": {"content": "refund order 42"}}
REFUND = ("call_r", "refund", {"order": 42, "amount": 120})
EMAIL = ("call_e", "email", {"to": "ann@example.com"})


def test_the_one_pending_call_is_named() -> None:
    pending = pending_tool_calls([HUMAN, _ai(REFUND)])
    assert interrupt_call(pending, {"question": "ok?"}) == {
        "tool_call_id": "call_r",
        "tool_name": "refund",
        "tool_arguments": {"order": 42, "amount": 120},
    }


def test_an_answered_call_is_not_pending() -> None:
    assert pending_tool_calls([HUMAN, _ai(REFUND, EMAIL), _tool("call_r")]) == [
        {"tool_call_id": "call_e", "tool_name": "email", "tool_arguments": EMAIL[2]}
    ]
    assert pending_tool_calls([HUMAN, _ai(REFUND), _tool("call_r")]) == []


def test_a_later_ai_message_without_calls_leaves_nothing_pending() -> None:
    final = {"type": "ai", "data": {"content": "done", "tool_calls": []}}
    assert pending_tool_calls([HUMAN, _ai(REFUND), final]) == []
    assert interrupt_call([], "anything") == {}


def test_among_several_the_one_the_interrupt_names_else_all() -> None:
    pending = pending_tool_calls([HUMAN, _ai(REFUND, EMAIL)])
    assert interrupt_call(pending, {"tool_call_id": "call_e"})["tool_name"] == "email"
    assert interrupt_call(pending, {"tool_call_id": "call_x"}) == {"pending_calls": pending}
    assert interrupt_call(pending, None) == {"pending_calls": pending}
