"""LangGraph checkpoint stores (langgraph-checkpoint-postgres 3.x) and LangChain messages.

`read_postgres(dsn)` reads each thread's latest checkpoint (root namespace, the one LangGraph
itself resumes from) and decodes its `messages` channel from `checkpoint_blobs`, plus the
pending writes saved for the unfinished step after it: messages written by tasks that already
finished (e.g. one of two parallel tool calls) and the `interrupt()`s the thread waits on.
It does so without importing langgraph and without building any object: msgpack extension
payloads (`[module, name, kwargs, ...]`, docs/api.md §10.1) become plain dicts with a `__type__`
key, so nothing in the store can run code here. Pickled and encrypted blobs are reported,
never decoded. The connection is read-only: importing never changes the agent's store.
Decoding needs `ormsgpack` (the same library LangGraph writes with).

`convert` turns LangChain message dicts (decoded ext objects, or `messages_to_dict` output
`{"type": "ai", "data": {...}}`) into event bodies. Events are named after LangChain ids, not
positions: a message `lg:<message id>`, a tool call `lg:<AI message id>:<tool_call_id>`, its
result `lg:<AI message id>:<tool_call_id>:result`, an interrupt `lg:interrupt:<id>`. So
importing the store again after the agent moved on appends only what is new, even where
LangGraph's head changed order (pending writes folded into the channel) or dropped messages
(RemoveMessage, a fork). Not handled: a message LangGraph replaced under the same id (the
log refuses the new body, IdempotencyConflict) and subgraph namespaces (only the root graph).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from threads.domain.canonical import canonical_json
from threads.importers.common import (
    CallTracker,
    Conversation,
    Converted,
    ImportFormatError,
    has_content,
    message,
    result_status,
    tool_result,
)

# LangChain message type -> role (HumanMessage is "human", AIMessage "ai", ...).
ROLE_OF = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "developer": "developer",
    "tool": "tool",
    "function": "tool",
    "chat": "user",
}
CLASS_TYPE = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "FunctionMessage": "function",
    "ChatMessage": "chat",
    "HumanMessageChunk": "human",
    "AIMessageChunk": "ai",
    "ToolMessageChunk": "tool",
    "SystemMessageChunk": "system",
    "RemoveMessage": "remove",
}
MESSAGES_CHANNEL = "messages"
INTERRUPT_CHANNEL = "__interrupt__"
ERROR_CHANNEL = "__error__"
MAX_CLIENT_ID = 200

Decode = Callable[[str | None, bytes | None], Any]


def _message_type(item: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    if "__type__" in item:
        return CLASS_TYPE.get(str(item["__type__"]).rsplit(".", 1)[-1]), item
    if isinstance(item.get("data"), dict):
        return item.get("type"), item["data"]
    return item.get("type"), item


def _client_id(*parts: Any) -> str | None:
    """`lg:<message id>[:<tool_call_id>]`, or None (the importer then numbers the event by
    position) when the message has no id or the id would not fit."""
    if any(not isinstance(p, str) or not p for p in parts):
        return None
    value = "lg:" + ":".join(parts)
    return value if len(value) <= MAX_CLIENT_ID else None


def _with_id(body: dict[str, Any], client_id: str | None) -> dict[str, Any]:
    if client_id is not None:
        body["client_event_id"] = client_id
    return body


def _interrupt_text(value: Any) -> str:
    if isinstance(value, dict):
        for key in ("question", "message", "description", "text"):
            if isinstance(value.get(key), str) and value[key].strip():
                return str(value[key])
    if isinstance(value, str) and value.strip():
        return value
    return canonical_json(value).decode()


def _interrupt_event(interrupt: Any, number: int) -> dict[str, Any]:
    """A LangGraph interrupt() is the graph waiting for a person: an open question in the log,
    with the interrupt's own value kept whole. Not an approval_request: a decision taken in
    ctxadmin would never reach the LangGraph run (it resumes with Command(resume=...))."""
    value = interrupt.get("value") if isinstance(interrupt, dict) else interrupt
    interrupt_id = interrupt.get("id") if isinstance(interrupt, dict) else None
    payload: dict[str, Any] = {"text": _interrupt_text(value), "value": value}
    if interrupt_id:
        payload["interrupt_id"] = interrupt_id
    body = {
        "kind": "annotation",
        "type": "question",
        "authority": "model",
        "payload": payload,
        "metadata": {"source": "langgraph interrupt"},
    }
    return _with_id(body, _client_id("interrupt", interrupt_id or str(number)))


def convert(conversation: Conversation) -> Converted:
    out = Converted()
    raw = conversation.raw if isinstance(conversation.raw, dict) else {}
    out.skipped.extend(str(reason) for reason in raw.get("unread") or [])
    tracker = CallTracker()
    # Client ids of the open calls per tool_call_id, latest last (the log binds a result to the
    # latest open call). A result is named after its call, not after its ToolMessage: a
    # finished parallel task's ToolMessage is saved as a pending write without an id, and
    # LangGraph gives it a fresh random id only when the step completes.
    open_calls: dict[str, list[str | None]] = {}
    for index, item in enumerate(conversation.items):
        if not isinstance(item, dict):
            out.skipped.append(f"message {index}: not an object")
            continue
        kind, data = _message_type(item)
        role = ROLE_OF.get(kind or "")
        if role is None:
            out.skipped.append(f"message {index}: message type {kind!r} is not imported")
            continue
        content = data.get("content")
        message_id = data.get("id")
        if role == "tool":
            call_id = data.get("tool_call_id")
            if not call_id or not tracker.result(call_id):
                out.skipped.append(f"message {index}: result for {call_id!r} has no open call")
                continue
            call_client_id = open_calls[call_id].pop()
            status = "failed" if data.get("status") == "error" else result_status(content)
            body = tool_result(call_id, content, status, name=data.get("name"))
            result_id = f"{call_client_id}:result" if call_client_id else None
            if result_id and len(result_id) > MAX_CLIENT_ID:
                result_id = None
            out.events.append(_with_id(body, result_id))
            continue
        calls = data.get("tool_calls") or []
        if has_content(content) or not calls:
            out.events.append(
                _with_id(
                    message(role, content if content is not None else "", id=message_id),
                    _client_id(message_id),
                )
            )
        group = f"turn-{index}" if len(calls) > 1 else None
        if group and isinstance(message_id, str) and message_id:
            # The message id, not its position, so the group survives a re-import.
            group = f"lg:{message_id}"[:MAX_CLIENT_ID]
        repeats: dict[str, int] = {}
        for call in calls:
            if not isinstance(call, dict) or not call.get("id") or not call.get("name"):
                out.skipped.append(f"message {index}: tool call without id or name")
                continue
            tracker.call(call["id"])
            # A model that repeats a tool_call_id within one message still made two calls.
            repeats[call["id"]] = repeats.get(call["id"], 0) + 1
            suffix = f"#{repeats[call['id']]}" if repeats[call["id"]] > 1 else ""
            call_client_id = _client_id(message_id, call["id"] + suffix)
            open_calls.setdefault(call["id"], []).append(call_client_id)
            args = call.get("args")
            call_body: dict[str, Any] = {
                "kind": "tool_call",
                "tool_call_id": call["id"],
                "tool_name": call["name"],
                "arguments": args if isinstance(args, dict) else {"_raw": args},
            }
            if group:
                call_body["group"] = group
            out.events.append(_with_id(call_body, call_client_id))
    for number, interrupt in enumerate(raw.get("interrupts") or []):
        out.events.append(_interrupt_event(interrupt, number))
    return out


def _decoder() -> Decode:
    try:
        import ormsgpack
    except ModuleNotFoundError as exc:
        raise ImportFormatError(
            "the langgraph-postgres format needs the `ormsgpack` package to decode LangGraph's "
            "msgpack blobs, and it is not installed in this environment"
        ) from exc

    def ext_hook(code: int, data: bytes) -> Any:
        # LangGraph's own hook would import `module` and call `name(...)` here; this one only
        # records what the payload names, so a crafted blob cannot run anything.
        value = ormsgpack.unpackb(data, ext_hook=ext_hook, option=ormsgpack.OPT_NON_STR_KEYS)
        if code == 7:  # delta snapshot
            return {"__delta_snapshot__": value}
        if isinstance(value, list | tuple) and len(value) >= 3:
            module, name, payload = value[0], value[1], value[2]
            if (module, name) == ("uuid", "UUID") and isinstance(payload, str):
                h = payload
                return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
            if isinstance(payload, dict):
                return {"__type__": f"{module}.{name}", **payload}
            return {"__type__": f"{module}.{name}", "__args__": payload}
        return {"__ext__": code, "__data__": value}

    def decode(type_: str | None, blob: bytes | None) -> Any:
        if type_ in (None, "empty", "null") or blob is None:
            return None
        if type_ == "msgpack":
            return ormsgpack.unpackb(
                bytes(blob), ext_hook=ext_hook, option=ormsgpack.OPT_NON_STR_KEYS
            )
        if type_ == "json":
            return json.loads(bytes(blob))
        # "pickle" and encrypted "<type>+<cipher>" blobs are never decoded here.
        raise ImportFormatError(f"a blob of type {type_!r} cannot be read safely")

    return decode


def _message_list(value: Any) -> list[Any]:
    if isinstance(value, dict) and "__delta_snapshot__" in value:
        value = value["__delta_snapshot__"]
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def _read_thread(conn: Any, decode: Decode, thread_id: str) -> dict[str, Any] | None:
    head = conn.execute(
        "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = %s "
        "AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1",
        (thread_id,),
    ).fetchone()
    if head is None:
        return None
    checkpoint_id, checkpoint = head
    unread: list[str] = []
    messages: Any = checkpoint.get("channel_values", {}).get(MESSAGES_CHANNEL)
    version = checkpoint.get("channel_versions", {}).get(MESSAGES_CHANNEL)
    if version is not None:
        row = conn.execute(
            "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s AND "
            "checkpoint_ns = '' AND channel = %s AND version = %s",
            (thread_id, MESSAGES_CHANNEL, str(version)),
        ).fetchone()
        if row is not None:
            try:
                messages = decode(*row)
            except ImportFormatError as exc:
                unread.append(f"checkpoint {checkpoint_id} messages: {exc}; not imported")
                messages = None
    items = _message_list(messages)
    seen = {m.get("id") for m in items if isinstance(m, dict) and m.get("id")}
    interrupts: list[Any] = []
    # Writes saved for the step after the head, in LangGraph's own order; a finished task's
    # messages are already final (LangGraph will not run that task again on resume).
    writes = conn.execute(
        "SELECT task_id, channel, type, blob FROM checkpoint_writes WHERE thread_id = %s "
        "AND checkpoint_ns = '' AND checkpoint_id = %s AND channel = ANY(%s) "
        "ORDER BY task_path, task_id, idx",
        (thread_id, checkpoint_id, [MESSAGES_CHANNEL, INTERRUPT_CHANNEL, ERROR_CHANNEL]),
    ).fetchall()
    for task_id, channel, type_, blob in writes:
        try:
            value = decode(type_, blob)
        except ImportFormatError as exc:
            unread.append(f"pending {channel} write of task {task_id}: {exc}; not imported")
            continue
        if channel == MESSAGES_CHANNEL:
            for item in _message_list(value):
                item_id = item.get("id") if isinstance(item, dict) else None
                if item_id and item_id in seen:
                    continue
                kind = _message_type(item)[0] if isinstance(item, dict) else None
                if isinstance(item, dict) and not item_id and kind not in ("tool", "function"):
                    # LangGraph names it with a random id only when the step completes, so
                    # importing it now would import it twice; a tool result is named after
                    # its call instead (convert), so it is safe to take now.
                    unread.append(
                        f"pending message of task {task_id} has no id yet; it is imported "
                        "once LangGraph completes the step"
                    )
                    continue
                seen.add(item_id)
                items.append(item)
        elif channel == INTERRUPT_CHANNEL:
            interrupts.extend(_message_list(value))
        else:
            # A crashed task leaves no event of its own: its tool call stays open.
            unread.append(f"pending error of task {task_id}: {str(value)[:300]}")
    if not items and not interrupts and not unread:
        return None
    return {
        "id": thread_id,
        "messages": items,
        "interrupts": interrupts,
        "unread": unread,
        "checkpoint_id": checkpoint_id,
    }


def read_postgres(dsn: str) -> list[dict[str, Any]]:
    """Each thread's latest checkpoint (root namespace) as {"id", "messages", "interrupts",
    "unread", "checkpoint_id"}; `unread` says what could not be decoded safely."""
    decode = _decoder()
    import psycopg

    conversations = []
    try:
        with psycopg.connect(dsn) as conn:
            conn.read_only = True
            threads = conn.execute(
                "SELECT DISTINCT thread_id FROM checkpoints WHERE checkpoint_ns = '' "
                "ORDER BY thread_id"
            ).fetchall()
            for (thread_id,) in threads:
                conversation = _read_thread(conn, decode, thread_id)
                if conversation is not None:
                    conversations.append(conversation)
    except psycopg.errors.UndefinedTable as exc:
        raise ImportFormatError(
            f"no LangGraph checkpoint tables at this DSN (run PostgresSaver.setup() there): {exc}"
        ) from exc
    except psycopg.Error as exc:
        raise ImportFormatError(f"cannot read the LangGraph store: {exc}") from exc
    return conversations
