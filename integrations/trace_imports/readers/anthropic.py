"""Anthropic Messages (docs/api.md, "Import formats"): top-level `system`; `messages` alternate user
and assistant, each a string or a list of blocks. The assistant calls tools with
`{"type": "tool_use", "id", "name", "input": {...}}`; the user answers with
`{"type": "tool_result", "tool_use_id", "content", "is_error"?}` blocks inside a user message.

Every message or block left out is named in `skipped` with its position and why (an empty
`content`, OpenAI-style `tool_calls` on a message, a block that is not one), so an import's
report accounts for every item of the file.
"""

from __future__ import annotations

from typing import Any

from integrations.trace_imports.readers.common import (
    CallTracker,
    Conversation,
    Converted,
    message,
    result_status,
    tool_result,
)
from threads.domain.render import content_text


def _flush(out: Converted, role: str, parts: list[Any], thinking: list[str]) -> None:
    if parts or thinking:
        content: Any = (
            parts[0]["text"] if len(parts) == 1 and parts[0].get("type") == "text" else list(parts)
        )
        out.events.append(message(role, content, thinking=list(thinking) or None))
    parts.clear()
    thinking.clear()


def convert(conversation: Conversation) -> Converted:
    out = Converted.with_system(conversation.system)
    tracker = CallTracker()
    for index, item in enumerate(conversation.items):
        if not isinstance(item, dict):
            out.skipped.append(f"message {index}: not an object")
            continue
        if item.get("role") not in ("user", "assistant"):
            out.skipped.append(
                f"message {index}: role {item.get('role')!r} is not user or assistant"
            )
            continue
        role, content = item["role"], item.get("content")
        if item.get("tool_calls"):
            # Another provider's shape: its calls would be lost without a word.
            out.skipped.append(
                f"message {index}: OpenAI-style `tool_calls` (Anthropic calls tools with "
                "tool_use blocks): its tool calls were not imported"
            )
            if content in (None, "", []):
                continue  # nothing else in it: named once
        if isinstance(content, str):
            out.events.append(message(role, content))
            continue
        if not isinstance(content, list) or not content:
            out.skipped.append(
                f"message {index}: "
                + ("empty content" if content in (None, []) else "content is not text or blocks")
            )
            continue
        parts: list[Any] = []
        thinking: list[str] = []
        # Blocks keep their order: text blocks between tool blocks become their own message.
        for number, block in enumerate(content):
            where = f"message {index}, block {number}"
            if not isinstance(block, dict):
                out.skipped.append(f"{where}: a block that is not an object")
                continue
            kind = block.get("type")
            if kind == "tool_use":
                if not block.get("id") or not block.get("name"):
                    out.skipped.append(f"{where}: tool_use without id or name")
                    continue
                _flush(out, role, parts, thinking)
                tracker.call(block["id"])
                out.events.append(
                    {
                        "kind": "tool_call",
                        "tool_call_id": block["id"],
                        "tool_name": block["name"],
                        "arguments": block.get("input") or {},
                    }
                )
            elif kind == "tool_result":
                _flush(out, role, parts, thinking)
                call_id = block.get("tool_use_id")
                if not call_id or not tracker.result(call_id):
                    out.skipped.append(f"{where}: result for {call_id!r} has no call")
                    continue
                value = block.get("content")
                text = value if isinstance(value, str) else content_text(value or [])
                status = result_status(text, is_error=bool(block.get("is_error")))
                out.events.append(tool_result(call_id, value, status))
            elif kind == "thinking":
                # The signature is an opaque token for the provider, not context.
                thinking.append(block.get("thinking", ""))
            elif kind == "redacted_thinking":
                thinking.append("[redacted]")
            elif kind is not None:
                parts.append(block)
            else:
                out.skipped.append(f"{where}: a block without a type")
        _flush(out, role, parts, thinking)
    return out
