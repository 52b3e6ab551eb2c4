"""LangChain messages as events of the log, and back (docs/langgraph.md, "Agent frameworks").

The one conversion between the two shapes, used by the live checkpointer's mirror
(integrations.langgraph_checkpointer.services.message_mirror) and by the import of a LangGraph store
(integrations.trace_imports.readers.langgraph_store) alike, with one naming of the events: a
message's event is named by its LangChain id, a tool call `<that name>/call/<tool_call_id>`. So a
thread imported from a LangGraph store and then continued live through the saver appends nothing
twice.

A message arrives as its JSON form (`langchain_core.messages.message_to_dict`: `{"type",
"data"}`), never as serialised bytes, so nothing here decodes or executes anything. Each message
becomes the events an agent would have appended itself; the event carrying it keeps the JSON
form without its content (`metadata["langchain"]`), which the event's own `content` or `result`
holds, so that a message is stored once and rebuilt exactly.
"""

from __future__ import annotations

import hashlib
import json
import uuid
import zlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from threads.domain.errors import InvalidEvent

# The action of the approval request an interrupt() opens (docs/repairs.md, "Approvals").
INTERRUPT_ACTION = "langgraph.interrupt"

METADATA_KEY = "langchain"
# The channel of the root graph whose LangChain messages are mirrored into the log.
MESSAGES_CHANNEL = "messages"
ERROR_CHANNEL = "__error__"  # LangGraph's channel of a task's exception
INTERRUPT_CHANNEL = "__interrupt__"  # LangGraph's channel of a task's interrupt()s
# LangChain message type -> the role of its `message` event
ROLE_OF_TYPE = {
    "human": "user",
    "system": "system",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
}
CHAT_ROLES = ("system", "developer", "user", "assistant")
# A tool message may state its call's outcome itself (`additional_kwargs`), which then wins over
# its `status`: "unknown" (or "timeout") when the tool cannot know whether it took effect.
OUTCOME_KEY = "ctxadmin_outcome"
OUTCOMES = {
    "unknown": "timeout",
    "timeout": "timeout",
    "succeeded": "succeeded",
    "failed": "failed",
    "cancelled": "cancelled",
}
# Exceptions after which a side effect may or may not have happened: a timeout or a connection
# lost once the request could have been sent (Python's own, httpx's, requests', http.client's,
# and the client's `OutcomeUnknown`). LangGraph's ToolNode turns a tool's exception into an
# error ToolMessage whose content starts with "Error: <repr(exception)>".
UNKNOWN_OUTCOME_ERRORS = (
    "TimeoutError",
    "timeout",  # socket.timeout before Python 3.10
    "CancelledError",
    "ReadTimeout",
    "WriteTimeout",
    "RemoteProtocolError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "BrokenPipeError",
    "RemoteDisconnected",
    "IncompleteRead",
    "ReadError",  # httpx: the connection broke while reading the answer
    "ChunkedEncodingError",  # requests: the same
    "ReadTimeoutError",  # urllib3
    "ProtocolError",  # urllib3: the connection was aborted
    "OutcomeUnknown",
)


def tool_result_status(data: dict[str, Any], side_effect_tools: Collection[str] = ()) -> str:
    """The tool_result status of a LangChain tool message (its JSON form's `data`): the outcome
    the message states (`additional_kwargs["ctxadmin_outcome"]`) when it does; for an error
    message of a side-effecting tool (`name` in `side_effect_tools`) whose content names an
    exception of UNKNOWN_OUTCOME_ERRORS, `timeout` (the call's side effect is then `unknown`,
    never `failed`); `failed` for any other error; else `succeeded`."""
    extra = data.get("additional_kwargs")
    stated = extra.get(OUTCOME_KEY) if isinstance(extra, dict) else None
    if isinstance(stated, str) and stated in OUTCOMES:
        return OUTCOMES[stated]
    if data.get("status") != "error":
        return "succeeded"
    content = data.get("content")
    if data.get("name") in side_effect_tools and isinstance(content, str):
        text = content.removeprefix("Error: ").lstrip()
        for name in UNKNOWN_OUTCOME_ERRORS:
            if text.startswith((f"{name}(", f"{name}:")) or text == name:
                return "timeout"
    return "failed"


# The class a store's msgpack payload names -> the message's type (its JSON form's "type").
TYPE_OF_CLASS = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
    "HumanMessageChunk": "HumanMessageChunk",
    "AIMessageChunk": "AIMessageChunk",
    "ToolMessageChunk": "ToolMessageChunk",
    "SystemMessageChunk": "SystemMessageChunk",
    "RemoveMessage": "remove",
}


def message_form(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON form (`message_to_dict`: `{"type", "data"}`) of a message as a LangGraph store
    holds it once decoded without building objects (`{"__type__": "<module>.<class>",
    **model_dump()}`), or of a form already; None for anything else. A payload is the message's
    `model_dump()`, which is what `message_to_dict` puts under `data`: the live saver sends
    the same form, so both name and record the message alike."""
    if "__type__" in item:
        kind = TYPE_OF_CLASS.get(str(item["__type__"]).rsplit(".", 1)[-1])
        if kind is None:
            return None
        data = {k: v for k, v in item.items() if k != "__type__"}
        return {"type": str(data.get("type") or kind), "data": data}
    if isinstance(item.get("type"), str) and isinstance(item.get("data"), dict):
        return {"type": item["type"], "data": item["data"]}
    return None


def message_digest(message: dict[str, Any]) -> str:
    """SHA-256 of the message's JSON form, keys sorted: the client computes the same."""
    text = json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def checkpoint_pack(checkpoint: dict[str, Any]) -> bytes:
    """A checkpoint's JSON as stored: compact and zlib-compressed. Its `channel_versions` and
    `versions_seen` repeat the same version strings, which compress to about a third."""
    text = json.dumps(checkpoint, separators=(",", ":"), ensure_ascii=False)
    return zlib.compress(text.encode("utf-8"), 6)


def checkpoint_unpack(data: bytes) -> dict[str, Any]:
    """The checkpoint's JSON again, exactly as LangGraph sent it."""
    loaded: dict[str, Any] = json.loads(zlib.decompress(data))
    return loaded


def message_event_bodies(
    message: dict[str, Any], key: str, side_effect_tools: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The events (bodies as an agent submits them) that record `message`; `key` is the
    carrying event's client_event_id (the message's id), each tool call's is
    `<key>/call/<tool_call_id>`. A call of a tool in `side_effect_tools` is a side effect
    (docs/repairs.md, "Side effects") whose idempotency key is its tool call id; a tool_call_id a
    model repeats within one message is numbered from its second call on (`#2`...), in both names,
    so that each call is recorded. A tool message's result status is `tool_result_status`'s.
    Raises InvalidEvent for a message with no event form."""
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
                "status": tool_result_status(data, side_effect_tools),
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
    repeats: dict[Any, int] = {}
    for call in data.get("tool_calls") or []:
        call_id = call.get("id")
        repeats[call_id] = repeats.get(call_id, 0) + 1
        suffix = f"#{repeats[call_id]}" if repeats[call_id] > 1 else ""
        body = {
            "kind": "tool_call",
            "client_event_id": f"{key}/call/{call_id}{suffix}",
            "tool_call_id": call_id,
            "tool_name": call.get("name"),
            "arguments": call.get("args"),
        }
        if call.get("name") in side_effect_tools:
            body.update(side_effect=True, idempotency_key=f"{call_id}{suffix}")
        bodies.append(body)
    return bodies


def message_from_event(kind: str, data: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    """The message's JSON form again, from the event that carries it."""
    content = data.get("result") if kind == "tool_result" else data.get("content")
    return message_from_parts(metadata[METADATA_KEY], content)


def message_is_redacted(metadata: Mapping[str, Any] | None) -> bool:
    """The event carrying a message keeps nothing of its JSON form: it was redacted (its data
    and metadata are gone; docs/langgraph.md, "Redaction")."""
    return not isinstance(metadata, Mapping) or METADATA_KEY not in metadata


# The content a redacted message reads with: the event holds no content to read.
REDACTED_CONTENT = "[redacted]"
# A redacted message event's role -> the type of the message it carried
TYPE_OF_ROLE = {"user": "human", "assistant": "ai", "system": "system", "developer": "chat"}


def redacted_message(
    *,
    kind: str,
    role: str,
    message_id: str,
    tool_call_id: str = "",
    tool_calls: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The JSON form of a message whose event was redacted: what the log still knows of it (its
    id, its type by the event's kind and role, a tool message's call id, an AI message's calls
    from their own events) with REDACTED_CONTENT as its content, shaped as LangChain's
    `message_to_dict` shapes such a message, so that the graph's next run reads it as any
    other message."""
    kind_type = "tool" if kind == "tool_result" else TYPE_OF_ROLE.get(role, "human")
    data: dict[str, Any] = {
        "content": REDACTED_CONTENT,
        "additional_kwargs": {},
        "response_metadata": {},
        "type": kind_type,
        "name": None,
        "id": message_id,
    }
    if kind_type == "tool":
        data.update(tool_call_id=tool_call_id, artifact=None, status="success")
    elif kind_type == "ai":
        data.update(
            tool_calls=[
                {
                    "name": call.get("name") or "",
                    "args": call.get("args") if isinstance(call.get("args"), dict) else {},
                    "id": call.get("id"),
                    "type": "tool_call",
                }
                for call in tool_calls
            ],
            invalid_tool_calls=[],
            usage_metadata=None,
        )
    elif kind_type == "chat":
        data["role"] = role
    return {"type": kind_type, "data": data}


def message_from_parts(stored: dict[str, Any], content: Any) -> dict[str, Any]:
    """The message's JSON form again, from what its event keeps of it (`metadata["langchain"]`)
    and its content (the event's `content`, or a tool result's `result`)."""
    return {"type": stored["type"], "data": {**stored["data"], "content": content}}


def pending_tool_calls(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The calls a task interrupted at these messages (JSON forms, in order) was about to
    run: those of the last AI message that no tool message after it answers, each as
    `{"tool_call_id", "tool_name", "tool_arguments"}`. Empty when the last AI message makes
    no call, or every one is answered."""
    for index in range(len(messages) - 1, -1, -1):
        kind, data = messages[index].get("type"), messages[index].get("data")
        if kind in ("ai", "AIMessageChunk") and isinstance(data, Mapping):
            answered = {
                later["data"].get("tool_call_id")
                for later in messages[index + 1 :]
                if later.get("type") == "tool" and isinstance(later.get("data"), Mapping)
            }
            return [
                {
                    "tool_call_id": call.get("id"),
                    "tool_name": call.get("name"),
                    "tool_arguments": call.get("args"),
                }
                for call in data.get("tool_calls") or []
                if isinstance(call, Mapping) and call.get("id") not in answered
            ]
    return []


def interrupt_call(pending: Sequence[Mapping[str, Any]], value: Any) -> dict[str, Any]:
    """What an `interrupt()` approval names of the call it asks about (docs/api.md,
    "Put writes — `POST /api/v1/threads/{id}/langgraph/writes/`"): the one pending call's
    `tool_call_id`, `tool_name` and `tool_arguments`; among several, the one the interrupt's value
    names by `tool_call_id`, else all of them as `pending_calls`; nothing when no call is
    pending."""
    named = value.get("tool_call_id") if isinstance(value, Mapping) else None
    chosen = [call for call in pending if named is not None and call["tool_call_id"] == named]
    if len(pending) == 1 or chosen:
        return dict((chosen or pending)[0])
    if pending:
        return {"pending_calls": [dict(call) for call in pending]}
    return {}


# 100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch.
_UUID_EPOCH_OFFSET = 0x01B21DD213814000


def _uuid6_timestamp(checkpoint_id: str) -> int | None:
    """The 60-bit timestamp of a version-6 UUID (LangGraph's checkpoint ids), or None."""
    try:
        value = uuid.UUID(checkpoint_id).int
    except ValueError:
        return None
    return ((value >> 80) & 0xFFFFFFFFFFFF) << 12 | (value >> 64) & 0x0FFF


def checkpoint_id_after(previous: str, *, now_ns: int, clock_seq: int, node: int) -> str:
    """A checkpoint id as LangGraph makes them (a version-6 UUID: time-ordered, so that ids
    sort by time as text) that sorts after `previous`, also when the server's clock is behind
    the agent's. `clock_seq` (14 bits) and `node` (48 bits) fill the rest, as LangGraph does."""
    timestamp = now_ns // 100 + _UUID_EPOCH_OFFSET
    before = _uuid6_timestamp(previous)
    if before is not None and timestamp <= before:
        timestamp = before + 1
    value = ((timestamp >> 12) & 0xFFFFFFFFFFFF) << 80
    value |= 0x6 << 76 | (timestamp & 0x0FFF) << 64
    value |= (0x8000 | (clock_seq & 0x3FFF)) << 48
    value |= node & 0xFFFFFFFFFFFF
    made = str(uuid.UUID(int=value))
    # A previous id that is no uuid6 (another saver's) still has to sort below the new one.
    return made if made > previous else f"{previous}.1"


# The metadata key under which a rollback's LangGraph checkpoint carries what it repaired.
REPAIR_KEY = "ctxadmin_repair"


def repair_metadata(
    chosen: dict[str, Any], *, head_step: int, repair: dict[str, Any]
) -> dict[str, Any]:
    """The metadata of the checkpoint a rollback writes: the chosen checkpoint's, made what
    LangGraph's `update_state` writes (source "update", the step after the head's, no parents),
    with the repair's record (what was restored, why, and the side effects after it)."""
    return {**chosen, "source": "update", "step": head_step + 1, "parents": {}, REPAIR_KEY: repair}
