"""LangGraph checkpoint stores (langgraph-checkpoint-postgres 3.x) and LangChain messages.

`read_postgres(dsn)` reads each thread's latest checkpoint (root namespace, the one LangGraph
itself resumes from) and decodes its `messages` channel from `checkpoint_blobs`, plus the
pending writes saved for the unfinished step after it: messages written by tasks that already
finished (e.g. one of two parallel tool calls) and the `interrupt()`s the thread waits on.
It does so without importing langgraph and without building any object: msgpack extension
payloads (`[module, name, kwargs, ...]`, docs/api.md, "Import formats") become plain dicts with a
`__type__` key, so nothing in the store can run code here. Pickled and encrypted blobs are reported,
never decoded. The connection is read-only: importing never changes the agent's store.
Decoding needs `ormsgpack` (the same library LangGraph writes with).

`convert` turns each LangChain message (a decoded payload, or `messages_to_dict` output `{"type":
"ai", "data": {...}}`) into event bodies with the live saver's own conversion and names
(integrations.langgraph_checkpointer.domain.messages.message_event_bodies): a message's event is
named by its LangChain id, a tool call `<message id>/call/<tool_call_id>`; a side-effecting call's
idempotency key is its tool_call_id. So importing the store again after the agent moved on appends
only what is new, even where LangGraph's head changed order (pending writes folded into the channel)
or dropped messages (RemoveMessage, a fork); and a thread imported here, then continued live through
`CtxadminSaver`, appends nothing twice. A message without an id yet (a finished task's write, which
LangGraph names when the step completes) waits for its id, as it does for the saver. An interrupt is
named `lg:interrupt:<id>`. Not handled: a message LangGraph replaced under the same id (the log
refuses the new body, IdempotencyConflict) and subgraph namespaces (only the root graph). A store
imported before the importer took the saver's names appends its messages again once, under the new
names."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any

from integrations.langgraph_checkpointer.domain.messages import (
    ERROR_CHANNEL,
    INTERRUPT_CHANNEL,
    MESSAGES_CHANNEL,
    message_event_bodies,
    message_form,
)
from integrations.trace_imports.readers.common import (
    CallTracker,
    Conversation,
    Converted,
    ImportFormatError,
)
from threads.domain.canonical import canonical_json
from threads.domain.errors import InvalidEvent

MAX_CLIENT_ID = 200

Decode = Callable[[str | None, bytes | None], Any]


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
    name = (
        f"lg:interrupt:{interrupt_id if isinstance(interrupt_id, str) and interrupt_id else number}"
    )
    if len(name) <= MAX_CLIENT_ID:
        body["client_event_id"] = name
    return body


def convert(conversation: Conversation, side_effect_tools: Collection[str] = ()) -> Converted:
    """The events of a LangGraph thread's messages, by the live saver's conversion (calls of
    `side_effect_tools` are side effects, as the saver marks them), then its interrupts."""
    out = Converted()
    raw = conversation.raw if isinstance(conversation.raw, dict) else {}
    out.skipped.extend(str(reason) for reason in raw.get("unread") or [])
    tracker = CallTracker()
    for index, item in enumerate(conversation.items):
        form = message_form(item) if isinstance(item, dict) else None
        if form is None:
            out.skipped.append(f"message {index}: not a LangChain message")
            continue
        message_id = form["data"].get("id")
        try:
            bodies = message_event_bodies(form, str(message_id or ""), side_effect_tools)
        except InvalidEvent as exc:
            out.skipped.append(f"message {index}: {exc.message}; not imported")
            continue
        if not message_id or any(len(b["client_event_id"]) > MAX_CLIENT_ID for b in bodies):
            # No LangChain id (a graph whose state is no add_messages list), or one too long to
            # name an event by: the importer numbers its events by position instead.
            for body in bodies:
                del body["client_event_id"]
        if form["type"] == "tool":
            call_id = form["data"].get("tool_call_id")
            if not isinstance(call_id, str) or not tracker.result(call_id):
                out.skipped.append(f"message {index}: result for {call_id!r} has no open call")
                continue
        calls = [body for body in bodies if body["kind"] == "tool_call"]
        if any(not body["tool_call_id"] or not body["tool_name"] for body in calls):
            out.skipped.append(f"message {index}: a tool call without id or name; not imported")
            continue
        for body in calls:
            tracker.call(body["tool_call_id"])
        out.events.extend(bodies)
    for number, interrupt in enumerate(raw.get("interrupts") or []):
        out.events.append(_interrupt_event(interrupt, number))
    return out


def blob_decoder() -> Decode:
    """A reader of LangGraph's stored blobs ((type, bytes) as its serde writes them) that builds
    no object and never unpickles (see the module's docstring)."""
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
                if isinstance(item, dict) and not item_id:
                    # LangGraph names it with a random id only when the step completes, and
                    # its events are named by that id (as the live saver names them), so
                    # importing it now would import it twice.
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
    decode = blob_decoder()
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
