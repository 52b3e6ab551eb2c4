"""OpenAI Chat Completions `messages[]` (docs/api.md, "Import formats"), tau-bench's `traj`
included.

An assistant turn carries `tool_calls[{id, function: {name, arguments: "<JSON string>"}}]`;
a result is `{"role": "tool", "tool_call_id", "content"}`. The legacy `function_call` /
`{"role": "function", "name"}` pair has no id: the call gets one from its position and the
result binds to the latest open legacy call of that name.

Every item or call left out is named in `skipped` with its position and why (an assistant
turn with neither content nor a call among them), so an import's report accounts for it.
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


def _tool_call(call_id: str, name: str, arguments: Any, group: str | None) -> dict[str, Any]:
    args, raw = parse_arguments(arguments)
    body: dict[str, Any] = {
        "kind": "tool_call",
        "tool_call_id": call_id,
        "tool_name": name,
        "arguments": args,
    }
    if group:
        body["group"] = group
    if raw:
        body["metadata"] = {"arguments_not_json": True}
    return body


def _result(call_id: str, content: Any, **metadata: Any) -> dict[str, Any]:
    return tool_result(call_id, content, result_status(content), **metadata)


def convert(conversation: Conversation) -> Converted:
    out = Converted.with_system(conversation.system)
    tracker = CallTracker()
    legacy: dict[str, list[str]] = {}  # function name -> synthesized ids of open legacy calls
    for index, item in enumerate(conversation.items):
        if not isinstance(item, dict):
            out.skipped.append(f"item {index}: not an object")
            continue
        role = item.get("role")
        content = item.get("content")
        if role == "tool":
            call_id = item.get("tool_call_id")
            if not call_id or not tracker.result(call_id):
                out.skipped.append(f"item {index}: result for {call_id!r} has no open call")
                continue
            out.events.append(_result(call_id, content, name=item.get("name")))
        elif role == "function":
            name = item.get("name") or ""
            pending = legacy.get(name)
            if not pending:
                out.skipped.append(f"item {index}: function result {name!r} has no open call")
                continue
            call_id = pending.pop()
            tracker.result(call_id)
            out.events.append(_result(call_id, content, name=name, legacy_function_call=True))
        elif role in ROLES:
            calls = item.get("tool_calls") or []
            if not isinstance(calls, list):
                out.skipped.append(f"item {index}: `tool_calls` is not a list")
                calls = []
            legacy_call = item.get("function_call")
            if legacy_call and not isinstance(legacy_call, dict):
                out.skipped.append(f"item {index}: `function_call` is not an object")
                legacy_call = None
            if has_content(content) or role != "assistant":
                out.events.append(
                    message(role, content if content is not None else "", name=item.get("name"))
                )
            elif not calls and not legacy_call:
                out.skipped.append(
                    f"item {index}: an assistant message with no content and no call"
                )
            group = f"turn-{index}" if len(calls) > 1 else None
            for number, call in enumerate(calls):
                function = call.get("function") if isinstance(call, dict) else None
                function = function if isinstance(function, dict) else {}
                call_id, name = (
                    call.get("id") if isinstance(call, dict) else None,
                    function.get("name"),
                )
                if not call_id or not name:
                    out.skipped.append(f"item {index}, tool call {number}: without id or name")
                    continue
                tracker.call(call_id)
                out.events.append(_tool_call(call_id, name, function.get("arguments"), group))
            if legacy_call:
                function = legacy_call
                name = function.get("name") or "function"
                call_id = f"function_call-{index}"
                tracker.call(call_id)
                legacy.setdefault(name, []).append(call_id)
                body = _tool_call(call_id, name, function.get("arguments"), None)
                body.setdefault("metadata", {})["legacy_function_call"] = True
                out.events.append(body)
        else:
            out.skipped.append(f"item {index}: unknown role {role!r}")
    return out
