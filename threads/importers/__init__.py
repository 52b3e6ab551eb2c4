"""Importing recorded agent traces as threads (CONTRACT: `import_trace`).

One thread per conversation; a conversation's `id` becomes the thread's external_id. Every
event gets the client_event_id `import-<index>`, so importing the same file again appends
nothing, and importing a longer version of a conversation appends only what is new. Events go
through the normal append path (event_append_batch) in batches: the same validation, binding,
hashing and token counting as the API.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from threads.domain import tokens
from threads.domain.canonical import canonical_json
from threads.domain.events import normalize_event
from threads.domain.render import content_text
from threads.importers import anthropic, jsonl, langgraph, openai_chat, openai_responses
from threads.importers.common import (
    ITEM_KEYS,
    Conversation,
    Converted,
    ImportFormatError,
    conversation_of,
    external_id_for,
    read_file,
)
from threads.models import Thread, Workspace

FORMATS: dict[str, Callable[[Conversation], Converted]] = {
    "openai-chat": openai_chat.convert,
    "openai-responses": openai_responses.convert,
    "anthropic": anthropic.convert,
    "jsonl": jsonl.convert,
    "langgraph-postgres": langgraph.convert,
}
# tau-bench airline's tools that change a booking: marked side-effecting unless told otherwise.
DEFAULT_SIDE_EFFECT_TOOLS = frozenset(
    {
        "book_reservation",
        "cancel_reservation",
        "update_reservation_flights",
        "update_reservation_baggages",
        "update_reservation_passengers",
        "send_certificate",
    }
)
BATCH_SIZE = 500
TITLE_LENGTH = 80

__all__ = [
    "DEFAULT_SIDE_EFFECT_TOOLS",
    "FORMATS",
    "ImportFormatError",
    "ImportResult",
    "conversation_import",
    "read_conversations",
    "trace_import",
]


@dataclass
class ImportResult:
    thread: Thread
    created: int = 0  # events appended by this import (0 when it was imported before)
    total: int = 0
    skipped: list[str] = field(default_factory=list)


def read_conversations(source: str, fmt: str) -> list[Any]:
    """The conversations of a file (or, for langgraph-postgres, of a store at a DSN)."""
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "langgraph-postgres":
        return langgraph.read_postgres(source)
    values = read_file(source)
    if values and all(
        isinstance(v, dict) and ("role" in v or "type" in v) and not set(ITEM_KEYS) & set(v)
        for v in values
    ):
        # A file of messages or items, one a line, is a single conversation.
        return [values]
    if fmt == "jsonl" and (
        jsonl.is_export(values)
        or (values and all(isinstance(v, dict) and "kind" in v for v in values))
    ):
        # A file of event objects (an export, or an agent's log) is a single conversation.
        if jsonl.is_export(values):
            return [values]
        return [{"messages": values}]
    return values


def _conversation(value: Any, fmt: str, where: str) -> Conversation:
    if fmt == "jsonl" and isinstance(value, list) and jsonl.is_export(value):
        return jsonl.export_as_conversation(value)
    return conversation_of(value, where=where)


def _title(events: list[dict[str, Any]]) -> str:
    for event in events:
        if event["kind"] == "message" and event["role"] == "user":
            text = " ".join(content_text(event["content"]).split())
            return text[:TITLE_LENGTH]
    return ""


def _mark_side_effects(
    events: list[dict[str, Any]], external_id: str, side_effect_tools: Collection[str]
) -> None:
    """A call of a side-effecting tool gets an idempotency key derived from the thread and its
    tool_call_id (numbered when a real agent reused the id), the same on every import."""
    seen: dict[str, int] = {}
    for event in events:
        if event["kind"] != "tool_call" or event.get("side_effect"):
            continue
        call_id = event["tool_call_id"]
        seen[call_id] = seen.get(call_id, 0) + 1
        if event["tool_name"] in side_effect_tools:
            suffix = f"#{seen[call_id]}" if seen[call_id] > 1 else ""
            event["side_effect"] = True
            event["idempotency_key"] = f"{external_id}:{call_id}{suffix}"[:200]


def conversation_import(
    *,
    workspace: Workspace,
    conversation: Conversation,
    fmt: str,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
) -> ImportResult:
    from django.conf import settings

    from threads.services.audit import audit_record
    from threads.services.events import event_append_batch
    from threads.services.threads import thread_get_or_create

    converted = FORMATS[fmt](conversation)
    external_id = external_id_for(conversation, fmt)
    events = converted.events
    if conversation.tools and events:
        events[0] = {
            **events[0],
            "metadata": {**events[0].get("metadata", {}), "tools": conversation.tools},
        }
    _mark_side_effects(events, external_id, side_effect_tools)
    thread_settings: dict[str, Any] = {"title": _title(events)}
    if conversation.tools:
        # Tool definitions are part of every request's fixed input (I in DESIGN §4).
        thread_settings["fixed_tokens"] = tokens.count_text(
            canonical_json(conversation.tools).decode()
        )
    thread, _ = thread_get_or_create(
        workspace=workspace, external_id=external_id, **thread_settings
    )
    result = ImportResult(thread=thread, total=len(events), skipped=converted.skipped)
    max_bytes = settings.CTXADMIN_MAX_EVENT_BYTES
    for start in range(0, len(events), BATCH_SIZE):
        batch = []
        for index, body in enumerate(events[start : start + BATCH_SIZE], start=start):
            body = {**body, "client_event_id": body.get("client_event_id") or f"import-{index}"}
            batch.append(normalize_event(body, max_bytes=max_bytes))
        appended = event_append_batch(thread=thread, new_events=batch)
        result.created += sum(1 for a in appended if a.created)
    if result.created:
        audit_record(
            workspace=workspace,
            actor=None,
            action="trace_imported",
            target_type="thread",
            target_id=thread.pk,
            thread=thread,
            actor_label="import_trace",
            after={"format": fmt, "events": result.created, "skipped": len(converted.skipped)},
        )
    return result


def conversations_import(
    *,
    workspace: Workspace,
    conversations: Iterable[Any],
    fmt: str,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
    progress: Callable[[int, int], None] | None = None,
) -> list[ImportResult]:
    if fmt not in FORMATS:
        raise ImportFormatError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    values = list(conversations)
    results = []
    for number, value in enumerate(values):
        conversation = _conversation(value, fmt, where=f"conversation {number}")
        results.append(
            conversation_import(
                workspace=workspace,
                conversation=conversation,
                fmt=fmt,
                side_effect_tools=side_effect_tools,
            )
        )
        if progress is not None:
            progress(number + 1, len(values))
    return results


def trace_import(
    *,
    workspace: Workspace,
    conversations: Iterable[Any],
    fmt: str,
    progress: Callable[[int, int], None] | None = None,
    side_effect_tools: Collection[str] = DEFAULT_SIDE_EFFECT_TOOLS,
) -> list[Thread]:
    """Import conversations (already read from their file) into threads; one per conversation.
    For the Celery task: `progress(done, total)` counts conversations."""
    results = conversations_import(
        workspace=workspace,
        conversations=conversations,
        fmt=fmt,
        side_effect_tools=side_effect_tools,
        progress=progress,
    )
    return [r.thread for r in results]
