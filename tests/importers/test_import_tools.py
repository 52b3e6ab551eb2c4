"""An imported conversation's `tools` become the thread's tool definitions (docs/api.md,
"Import formats", docs/pipeline.md, "Tool definitions and repeated content"), and importing it again
writes nothing new."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.trace_imports.services.conversations import conversations_import
from threads.models import AuditEntry, ThreadTool, Workspace

pytestmark = pytest.mark.django_db

TOOLS = [
    {"type": "function", "function": {"name": "get_order", "parameters": {}}},
    {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}},
]
CONVERSATION = {
    "id": "chat-tools",
    "tools": TOOLS,
    "messages": [
        {"role": "user", "content": "Where is order 1?"},
        {"role": "assistant", "content": "Shipped."},
    ],
}


def _import(workspace: Workspace, conversation: Any) -> Any:
    [result] = conversations_import(
        workspace=workspace, conversations=[conversation], fmt="openai-chat"
    )
    return result


def test_import_stores_the_tools_once(workspace: Workspace) -> None:
    result = _import(workspace, CONVERSATION)
    thread = result.thread
    stored = list(ThreadTool.objects.filter(thread=thread).order_by("position"))
    assert [t.name for t in stored] == ["get_order", "refund"]
    assert [t.definition for t in stored] == TOOLS
    thread.refresh_from_db()
    assert thread.tool_tokens == sum(t.token_count for t in stored)
    # The fixed tokens the import sets agree with the tools' count.
    assert thread.fixed_tokens == thread.tool_tokens
    ids = [t.pk for t in stored]
    again = _import(workspace, CONVERSATION)
    assert again.created == 0 and again.thread.pk == thread.pk
    assert [t.pk for t in ThreadTool.objects.filter(thread=thread).order_by("position")] == ids
    assert AuditEntry.objects.filter(thread=thread, action="thread.tools_set").count() == 1


def test_tools_without_names_are_skipped_not_fatal(workspace: Workspace) -> None:
    result = _import(workspace, {**CONVERSATION, "id": "nameless", "tools": [{"type": "x"}]})
    assert result.created == 2
    assert any(s.startswith("tools: ") for s in result.skipped)
    assert not ThreadTool.objects.filter(thread=result.thread).exists()
