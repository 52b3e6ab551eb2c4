"""An import's report names every item it did not import, with its position and a reason
(docs/api.md, "Imports — `/api/v1/imports/`"): per format, the exact items dropped, and never an
empty reason."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.trace_imports.services.conversations import (
    ConversationReport,
    conversations_import,
)
from threads.models import Event, Workspace

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_fold_triggers")]


def _report(workspace: Workspace, conversation: Any, fmt: str) -> ConversationReport:
    lines: list[ConversationReport] = []
    conversations_import(
        workspace=workspace, conversations=[conversation], fmt=fmt, report=lines.append
    )
    (line,) = lines
    return line


def _kinds(line: ConversationReport) -> list[str]:
    assert line.thread is not None
    return [
        e.kind if e.kind != "message" else f"message:{e.role}"
        for e in Event.objects.filter(thread_id=line.thread).order_by("seq")
    ]


def test_anthropic_names_tool_calls_and_empty_content(workspace: Workspace) -> None:
    """Issue #27's five items: two imported, the three others each named."""
    conversation = {
        "id": "anthropic-five",
        "messages": [
            {"role": "user", "content": "refund order 7"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "refund", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
            {"role": "user", "content": []},
            {"role": "assistant", "content": [{"type": "text", "text": "refunded"}]},
        ],
    }
    line = _report(workspace, conversation, "anthropic")
    assert line.outcome == "created" and (line.events, line.appended) == (2, 2)
    assert _kinds(line) == ["message:user", "message:assistant"]
    assert line.reason == (
        "3 items were not imported: "
        "message 1: OpenAI-style `tool_calls` (Anthropic calls tools with tool_use blocks): "
        "its tool calls were not imported; "
        "message 2: role 'tool' is not user or assistant; "
        "message 3: empty content"
    )


def test_anthropic_names_each_block_left_out(workspace: Workspace) -> None:
    conversation = {
        "id": "anthropic-blocks",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "let me look"},
                    "stray text",
                    {"text": "no type"},
                    {"type": "tool_use", "name": "lookup", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "nowhere", "content": "x"}],
            },
            {"role": "assistant", "content": {"type": "text", "text": "an object"}},
        ],
    }
    line = _report(workspace, conversation, "anthropic")
    assert _kinds(line) == ["message:user", "message:assistant"]
    assert line.reason == (
        "5 items were not imported: "
        "message 1, block 1: a block that is not an object; "
        "message 1, block 2: a block without a type; "
        "message 1, block 3: tool_use without id or name; "
        "message 2, block 0: result for 'nowhere' has no call; "
        "message 3: content is not text or blocks"
    )


def test_openai_chat_names_every_drop_with_a_reason(workspace: Workspace) -> None:
    conversation = {
        "id": "openai-drops",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": ""},  # once dropped with no reason at all
            {"role": "tool", "tool_call_id": "ghost", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}, "junk"]},
            {"role": "assistant", "content": "ok", "tool_calls": {"id": "c2"}},
            {"role": "critic", "content": "meh"},
            {"role": "assistant", "function_call": "refund"},
        ],
    }
    line = _report(workspace, conversation, "openai-chat")
    assert line.outcome == "created"
    assert _kinds(line) == ["message:user", "message:assistant"]
    assert line.reason == (
        "8 items were not imported: "
        "item 1: an assistant message with no content and no call; "
        "item 2: result for 'ghost' has no open call; "
        "item 3, tool call 0: without id or name; "
        "item 3, tool call 1: without id or name; "
        "item 4: `tool_calls` is not a list; "
        "item 5: unknown role 'critic'; "
        "item 6: `function_call` is not an object; "
        "item 6: an assistant message with no content and no call"
    )


def test_openai_responses_names_a_message_with_no_content(workspace: Workspace) -> None:
    conversation = {
        "id": "responses-drops",
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "message", "role": "assistant", "content": []},
        ],
    }
    line = _report(workspace, conversation, "openai-responses")
    assert _kinds(line) == ["message:user"]
    assert line.reason == "1 item was not imported: item 1: a message with no content"


def test_a_refused_conversation_never_has_an_empty_reason(workspace: Workspace) -> None:
    lines: list[ConversationReport] = []
    conversations_import(
        workspace=workspace,
        conversations=[42, {"id": "x"}, {"id": "y", "messages": [{"role": "user"}]}],
        fmt="openai-chat",
        report=lines.append,
    )
    assert [line.outcome for line in lines][:2] == ["refused", "refused"]
    assert all(line.reason for line in lines if line.outcome == "refused"), lines


def test_every_item_is_named_however_many(workspace: Workspace) -> None:
    """No "and N more": all of them, each with its position."""
    items = [{"role": "user", "content": "hi"}] + [{"role": "critic"} for _ in range(15)]
    line = _report(workspace, {"id": "many", "messages": items}, "openai-chat")
    assert line.reason.startswith("15 items were not imported: ")
    for position in range(1, 16):
        assert f"item {position}: unknown role 'critic'" in line.reason
