"""LangChain messages as events of the log, and back (docs/design.md §15).

A message arrives as its JSON form (`langchain_core.messages.message_to_dict`: `{"type",
"data"}`), never as serialised bytes, so nothing here decodes or executes anything. Each message
becomes the events an agent would have appended itself; the event carrying it keeps the JSON
form without its content (`metadata["langchain"]`), which the event's own `content` or `result`
holds, so that a message is stored once and rebuilt exactly.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from threads.domain.errors import InvalidEvent

METADATA_KEY = "langchain"
# LangChain message type -> the role of its `message` event
ROLE_OF_TYPE = {
    "human": "user",
    "system": "system",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
}
CHAT_ROLES = ("system", "developer", "user", "assistant")


def message_digest(message: dict[str, Any]) -> str:
    """SHA-256 of the message's JSON form, keys sorted: the client computes the same."""
    text = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def message_event_bodies(message: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The events (bodies as an agent submits them) that record `message`; `key` is the
    carrying event's client_event_id. Raises InvalidEvent for a message with no event form."""
    kind, data = message.get("type"), message.get("data")
    if not isinstance(data, dict) or not isinstance(kind, str):
        raise InvalidEvent("a message is {type, data}", fields={"message": "not a message"})
    stored = {"type": kind, "data": {k: v for k, v in data.items() if k != "content"}}
    metadata = {METADATA_KEY: stored}
    content = data.get("content")
    if kind == "tool":
        return [
            {
                "kind": "tool_result",
                "client_event_id": key,
                "tool_call_id": data.get("tool_call_id"),
                "status": "failed" if data.get("status") == "error" else "succeeded",
                "result": content,
                "metadata": metadata,
            }
        ]
    role = ROLE_OF_TYPE.get(kind)
    if kind == "chat" and data.get("role") in CHAT_ROLES:
        role = data["role"]
    if role is None:
        raise InvalidEvent(
            f"a {kind} message has no event form", fields={"message": f"type {kind}"}
        )
    bodies = [
        {
            "kind": "message",
            "client_event_id": key,
            "role": role,
            "content": content,
            "metadata": metadata,
        }
    ]
    for call in data.get("tool_calls") or []:
        bodies.append(
            {
                "kind": "tool_call",
                "client_event_id": f"{key}/call/{call.get('id')}",
                "tool_call_id": call.get("id"),
                "tool_name": call.get("name"),
                "arguments": call.get("args"),
            }
        )
    return bodies


def message_from_event(kind: str, data: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    """The message's JSON form again, from the event that carries it."""
    stored = metadata[METADATA_KEY]
    content = data.get("result") if kind == "tool_result" else data.get("content")
    return {"type": stored["type"], "data": {**stored["data"], "content": content}}
