"""OpenAI Responses / Conversations items (docs/api.md, "Import formats").

`input` is a string or a list of items: `message` (content parts input_text/output_text),
`function_call` (`call_id`, `name`, `arguments` as a JSON string), `function_call_output`
(`call_id`, `output`), `custom_tool_call(_output)`, and `reasoning` (a `summary` list and an
`encrypted_content` blob). Reasoning summaries become assistant messages marked as reasoning;
encrypted-only reasoning and `compaction` items are opaque to anyone but the provider and are
left out, with the reason.
"""

from __future__ import annotations

from typing import Any

from integrations.trace_imports.readers.common import (
    ROLES,
    CallTracker,
    Conversation,
    Converted,
    has_content,
    message,
    parse_arguments,
    result_status,
    tool_result,
)


def _content(content: Any) -> Any:
    """Content parts as stored: a single text part collapses to its string."""
    if (
        isinstance(content, list)
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") in ("input_text", "output_text", "text")
    ):
        return content[0].get("text", "")
    return content


def convert(conversation: Conversation) -> Converted:
    out = Converted.with_system(conversation.system)
    tracker = CallTracker()
    for index, item in enumerate(conversation.items):
        if not isinstance(item, dict):
            out.skipped.append(f"item {index}: not an object")
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ROLES:
                out.skipped.append(f"item {index}: unknown role {role!r}")
                continue
            if has_content(item.get("content")):
                out.events.append(message(role, _content(item["content"]), id=item.get("id")))
            else:
                out.skipped.append(f"item {index}: a message with no content")
        elif kind in ("function_call", "custom_tool_call"):
            call_id = item.get("call_id") or item.get("id")
            if not call_id or not item.get("name"):
                out.skipped.append(f"item {index}: {kind} without call_id or name")
                continue
            if kind == "function_call":
                arguments, raw = parse_arguments(item.get("arguments"))
            else:
                arguments, raw = {"input": item.get("input", "")}, False
            meta = {
                k: v
                for k, v in (
                    ("id", item.get("id")),
                    ("item_type", kind),
                    ("arguments_not_json", raw),
                )
                if v
            }
            tracker.call(call_id)
            out.events.append(
                {
                    "kind": "tool_call",
                    "tool_call_id": call_id,
                    "tool_name": item["name"],
                    "arguments": arguments,
                    "metadata": meta,
                }
            )
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if not call_id or not tracker.result(call_id):
                out.skipped.append(f"item {index}: output for {call_id!r} has no open call")
                continue
            output = item.get("output")
            status = result_status(output)
            if item.get("status") == "incomplete":
                status = "cancelled"
            out.events.append(tool_result(call_id, output, status))
        elif kind == "reasoning":
            summary = [
                s.get("text", "")
                for s in item.get("summary") or []
                if isinstance(s, dict) and s.get("text")
            ]
            if summary:
                out.events.append(
                    message(
                        "assistant", "\n".join(summary), item_type="reasoning", id=item.get("id")
                    )
                )
            else:
                out.skipped.append(f"item {index}: reasoning with no readable summary")
        else:
            out.skipped.append(f"item {index}: item type {kind!r} is not imported")
    return out
