"""OpenAI Agents SDK items and ctxadmin events, both ways (`item_to_event`, `event_to_item`), for
`ctxadmin_client.agents`. Needs nothing of the SDK.

A message is a `message` event, a `function_call` a `tool_call` (its JSON-string `arguments`
parsed into an object), a `function_call_output` a `tool_result`; a `reasoning` item is an
assistant `message` whose content is the reasoning summary parts; any other item type is an
assistant `message` whose one content part is the item itself. What the event's own fields do
not carry (ids, statuses, the encrypted reasoning, the arguments' exact text unless it is
compact JSON with sorted keys) is kept in the event's `metadata["agents_item"]`, so that
`get_items` gives back each item exactly as it came.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from ctxadmin_client import exactly_once as once

# The metadata key of an event written by this session: {"form": ..., "extra": {...}}.
ITEM_KEY = "agents_item"
ROLES = ("system", "developer", "user", "assistant")
MARKER_KINDS = ("retraction", "reset")
# Fields of a stored event that are the log's bookkeeping, not what the agent said.
_STORED_FIELDS = frozenset(
    ("seq", "kind", "created_at", "client_event_id", "metadata", "hash", "token_count")
    + ("call_seq", "replayed", "secrets")
)


def _compact_json(value: Any) -> str:
    """Compact JSON with sorted keys: the text an argument object is rebuilt as. The server
    keeps JSON objects but not their key order, so only this text can be redone from one."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _is_parts(content: Any) -> bool:
    return isinstance(content, str) or (
        isinstance(content, list) and all(isinstance(p, str | dict) for p in content)
    )


def _id_text(value: Any) -> bool:
    """What the server accepts as a tool call id or a tool name (docs/api.md,
    "Events — `/api/v1/threads/{id}/events/`")."""
    return isinstance(value, str) and bool(value.strip()) and len(value) <= 200


def _without(item: Mapping[str, Any], *names: str) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key not in names}


def item_to_event(
    item: Mapping[str, Any], *, side_effect_tools: Collection[str] = ()
) -> dict[str, Any]:
    """The event (docs/api.md, "Events — `/api/v1/threads/{id}/events/`") that stores one Agents SDK
    input item; `event_to_item` of the stored event gives the item back, equal to what came in. A
    `function_call` of a tool in `side_effect_tools` is a side-effecting call (`side_effect: true`),
    its idempotency key the arguments' own `idempotency_key`, else the call id."""
    kind = item.get("type")
    if kind in (None, "message") and item.get("role") in ROLES and _is_parts(item.get("content")):
        event: dict[str, Any] = {
            "kind": "message",
            "role": item["role"],
            "content": item["content"],
        }
        return _with_item(event, "message", _without(item, "role", "content"))
    if kind == "function_call" and _id_text(item.get("call_id")) and _id_text(item.get("name")):
        raw = item.get("arguments")
        extra = _without(item, "call_id", "name", "arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            arguments = {"_raw": raw}
        if not (isinstance(raw, str) and _compact_json(arguments) == raw):
            extra["arguments"] = raw  # the exact text, when the object alone cannot redo it
        event = {
            "kind": "tool_call",
            "tool_call_id": item["call_id"],
            "tool_name": item["name"],
            "arguments": arguments,
        }
        if item["name"] in side_effect_tools:
            event["side_effect"] = True
            event["idempotency_key"] = once.idempotency_key_for(item["call_id"], arguments)
        return _with_item(event, "function_call", extra)
    if kind == "function_call_output" and _id_text(item.get("call_id")) and "output" in item:
        event = {
            "kind": "tool_result",
            "tool_call_id": item["call_id"],
            "status": "succeeded",
            "result": item["output"],
        }
        return _with_item(event, "function_call_output", _without(item, "call_id", "output"))
    if kind == "reasoning" and isinstance(item.get("summary"), list):
        # The summary is what a person (and the fold) can read of the reasoning; the encrypted
        # content rides in metadata, which token counts do not include.
        event = {"kind": "message", "role": "assistant", "content": list(item["summary"])}
        return _with_item(event, "reasoning", _without(item, "summary"))
    # Anything else (hosted tool calls, compaction items, ...) as it came: one content part,
    # counted by the server as its JSON text.
    event = {"kind": "message", "role": "assistant", "content": [dict(item)]}
    return _with_item(event, "raw", {})


def _with_item(event: dict[str, Any], form: str, extra: dict[str, Any]) -> dict[str, Any]:
    event["metadata"] = {ITEM_KEY: {"form": form, "extra": extra}}
    return event


def event_to_item(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Agents SDK input item an event of the working context stands for; None for the
    markers (`retraction`, `reset`), which a model never reads.

    An event this session wrote comes back exactly as its item came in. Events others wrote
    (another client, ctxadmin itself) get the nearest item: messages, function calls and
    outputs as such, anything else as a developer message naming the event's kind."""
    kind = event.get("kind")
    if kind in MARKER_KINDS:
        return None
    metadata = event.get("metadata")
    saved = metadata.get(ITEM_KEY) if isinstance(metadata, Mapping) else None
    form = saved.get("form") if isinstance(saved, Mapping) else None
    extra = dict(saved.get("extra") or {}) if isinstance(saved, Mapping) else {}
    if kind == "message" and form == "raw":
        return dict(event["content"][0])
    if kind == "message" and form == "reasoning":
        return {**extra, "summary": event["content"]}
    if kind == "message":
        return {**extra, "role": event["role"], "content": event["content"]}
    if kind == "tool_call":
        arguments = event.get("arguments")
        if "arguments" not in extra:
            extra["arguments"] = _compact_json(arguments)
        if form is None:
            extra["type"] = "function_call"
        return {**extra, "call_id": event["tool_call_id"], "name": event["tool_name"]}
    if kind == "tool_result":
        output = event.get("result")
        if form is None:
            extra["type"] = "function_call_output"
            if not isinstance(output, str):
                output = "" if output is None else _compact_json(output)
        return {**extra, "call_id": event["tool_call_id"], "output": output}
    fields = {key: value for key, value in event.items() if key not in _STORED_FIELDS}
    return {"role": "developer", "content": f"{kind}: {_compact_json(fields)}"}
