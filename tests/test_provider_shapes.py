"""The provider-shape checker itself (tests/provider_shapes.py): it accepts a well-formed
conversation and refuses each shape a provider answers with a 400."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from tests.provider_shapes import ShapeError, assert_provider_shapes


def _call(call_id: str = "c1") -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "refund", "args": {"order": 42}, "id": call_id}])


def test_a_conversation_with_answered_calls_and_a_leading_note_passes() -> None:
    assert_provider_shapes(
        [
            SystemMessage("you are helpful"),
            SystemMessage("rolled back: do not refund again"),
            HumanMessage("refund 42"),
            _call(),
            ToolMessage("refunded", tool_call_id="c1"),
            AIMessage("done"),
            HumanMessage("thanks"),
        ]
    )


@pytest.mark.parametrize(
    ("messages", "names"),
    [
        # a call without its result, then a user turn (what issue #22 saw after a rollback)
        ([HumanMessage("refund"), _call(), HumanMessage("and?")], "Chat Completions"),
        # a result with no call
        ([HumanMessage("hi"), ToolMessage("x", tool_call_id="nope")], "Chat Completions"),
        # the note in the middle: fine for OpenAI, not for Anthropic
        (
            [HumanMessage("hi"), AIMessage("hello"), SystemMessage("note"), HumanMessage("x")],
            "Anthropic",
        ),
        # a call answered only after another message
        (
            [HumanMessage("hi"), _call(), AIMessage("wait"), ToolMessage("x", tool_call_id="c1")],
            "Chat Completions",
        ),
    ],
)
def test_a_shape_a_provider_refuses_is_refused_by_name(
    messages: list[BaseMessage], names: str
) -> None:
    with pytest.raises(ShapeError, match=names):
        assert_provider_shapes(messages)
